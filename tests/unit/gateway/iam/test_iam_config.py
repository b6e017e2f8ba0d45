"""Loading accounts, users, groups and identity policies from the TOML configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.iam.config import ConfigError, load_directory
from gateway.iam.policy import Decision, RequestFacts

CONFIG = """
default_account = "222222222222"

[[accounts]]
id = "111111111111"
access_key_id = "root-a"
secret_access_key = "root-a-secret"

[[accounts.groups]]
name = "senders"
policies = ['''{"Version": "2012-10-17", "Statement": {"Effect": "Allow",
  "Action": "sqs:SendMessage", "Resource": "arn:aws:sqs:*:111111111111:*"}}''']

[[accounts.users]]
name = "alice"
access_key_id = "alice"
secret_access_key = "alice-secret"
groups = ["senders"]

[[accounts.users.policies]]
Version = "2012-10-17"
Statement = [{ Effect = "Allow", Action = "sqs:ReceiveMessage", Resource = "*" }]

[[accounts]]
id = "222222222222"

[[accounts.users]]
name = "ops"
access_key_id = "ops"
secret_access_key = "ops-secret"
admin = true
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "iam.toml"
    path.write_text(text)
    return path


def test_users_get_their_own_and_their_groups_policies(tmp_path: Path) -> None:
    directory = load_directory(write(tmp_path, CONFIG), "000000000000")
    alice = directory.credential("alice")
    assert alice is not None and alice.secret == "alice-secret"
    principal = alice.principal
    assert (principal.account_id, principal.arn) == (
        "111111111111",
        "arn:aws:iam::111111111111:user/alice",
    )

    def decision(action: str) -> set[Decision]:
        facts = RequestFacts(
            principal.arn,
            "111111111111",
            (f"sqs:{action}",),
            "arn:aws:sqs:us-east-1:111111111111:q",
            {},
        )
        return {p.evaluate(facts, resource_policy=False) for p in principal.policies}

    assert Decision.ALLOW in decision("SendMessage")
    assert Decision.ALLOW in decision("ReceiveMessage")
    assert decision("DeleteQueue") == {Decision.IMPLICIT_DENY}


def test_account_root_credentials_and_admins(tmp_path: Path) -> None:
    directory = load_directory(write(tmp_path, CONFIG), "000000000000")
    root = directory.credential("root-a")
    ops = directory.credential("ops")
    assert root is not None and root.principal.is_root and not root.principal.is_admin
    assert ops is not None and ops.principal.is_admin and not ops.principal.is_root
    assert directory.default_account_id == "222222222222"
    assert directory.credential("nobody") is None


def test_the_embedded_default_has_test_and_admin(tmp_path: Path) -> None:
    directory = load_directory(None, "000000000000")
    test = directory.credential("test")
    admin = directory.credential("admin")
    assert test is not None and test.secret == "test" and not test.principal.is_admin
    assert admin is not None and admin.secret == "admin" and admin.principal.is_admin
    assert directory.embedded_default and not directory.accept_any_access_key


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("[[accounts]]\nid = '12'\n", "12 digits"),
        ("title = 'no accounts'\n", "at least one"),
        ("[[accounts]]\nid = '111111111111'\n[[accounts.users]]\nname = 'x'\n", "required"),
        (
            "[[accounts]]\nid = '111111111111'\n[[accounts.users]]\nname = 'x'\n"
            "access_key_id = 'k'\nsecret_access_key = 's'\ngroups = ['ghosts']\n",
            "unknown group",
        ),
        (
            "[[accounts]]\nid = '111111111111'\n[[accounts.users]]\nname = 'x'\n"
            "access_key_id = 'k'\nsecret_access_key = 's'\npolicies = ['not json']\n",
            "policies\\[0\\]",
        ),
        (
            "[[accounts]]\nid = '111111111111'\naccess_key_id = 'k'\nsecret_access_key = 's'\n"
            "[[accounts]]\nid = '222222222222'\naccess_key_id = 'k'\nsecret_access_key = 't'\n",
            "used twice",
        ),
        ("[[accounts\n", "not valid TOML"),
    ],
)
def test_configuration_mistakes_are_reported_with_where(
    tmp_path: Path, text: str, complaint: str
) -> None:
    with pytest.raises(ConfigError, match=complaint):
        load_directory(write(tmp_path, text), "000000000000")


def test_the_readme_example_loads(tmp_path: Path) -> None:
    readme = (Path(__file__).parents[4] / "README.md").read_text()
    example = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    directory = load_directory(write(tmp_path, example), "000000000000")
    assert directory.account_ids() == ["111111111111", "222222222222"]
    ops = directory.credential("ops")
    assert ops is not None and ops.principal.is_admin
