"""The Kafka client properties every Kafka client KQS makes is given: the cluster's security.

One place says how to reach a secured cluster (TLS, SASL): a standard ``client.properties``
file (``--kafka-config FILE`` / ``KQS_KAFKA_CONFIG``, the file Kafka's own tools take as
``--command-config``) and ``KQS_KAFKA_*`` settings for its security keys
(``KQS_KAFKA_SECURITY_PROTOCOL=SASL_SSL`` is ``security.protocol=SASL_SSL``). The file may be
written for Java clients (``sasl.jaas.config``, a PEM ``ssl.truststore.location``; what MSK's
and Confluent Cloud's instructions give) or for librdkafka (``sasl.username``,
``ssl.ca.location``); `ClientProperties` renders it for both kinds of client KQS has:
librdkafka (the gateway, the dashboard, `confluent-kafka`) and Java (Spark's Kafka source
and sink, which take them with a ``kafka.`` prefix).

`use(bootstrap, properties)` registers them for one cluster, once, at a process's start;
every client config of that cluster starts from `connection(bootstrap)`. A registry per
bootstrap rather than a parameter threaded through every client: the clients are made in a
dozen places across `topology/`, and one process (a test run) may talk to a plaintext and a
secured cluster side by side.

Secrets (passwords, client secrets, JAAS texts, private keys) never leave this module in a
log line, an error message or a repr: `redacted()` is what may be shown.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

CONFIG_ENV = "KQS_KAFKA_CONFIG"
ENV_PREFIX = "KQS_KAFKA_"
# Only security keys come from `KQS_KAFKA_*`, so KQS's own settings of that prefix
# (KQS_KAFKA_BOOTSTRAP, KQS_KAFKA_PORT, ...) never turn into client properties.
_ENV_FAMILIES = ("security.", "ssl.", "sasl.")
REDACTED = "[redacted]"

_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
# Kafka 3.4+ (Spark 4.0 ships kafka-clients 3.9): the OIDC client-credentials login.
_OAUTH_LOGIN_HANDLER = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
)

# Java-client keys librdkafka has no use for (it would refuse them as unknown).
_JAVA_ONLY = frozenset(
    {
        "sasl.jaas.config",
        "sasl.login.callback.handler.class",
        "sasl.client.callback.handler.class",
        "sasl.mechanism",
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.truststore.password",
        "ssl.keystore.type",
        "ssl.protocol",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
    }
)
# librdkafka keys the Java client does not know, rendered into Java terms in `java()`.
_LIBRDKAFKA_ONLY = frozenset(
    {
        "sasl.mechanisms",
        "sasl.username",
        "sasl.password",
        "sasl.oauthbearer.method",
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.scope",
        "sasl.oauthbearer.extensions",
        "sasl.oauthbearer.config",
        "enable.sasl.oauthbearer.unsecure.jwt",
        "ssl.ca.location",
        "ssl.ca.pem",
        "ssl.certificate.location",
        "ssl.certificate.pem",
        "ssl.key.location",
        "ssl.key.pem",
        "enable.ssl.certificate.verification",
    }
)


class ClientPropertiesError(ValueError):
    """The properties cannot be used as given; the message names keys, never secret values."""


def is_secret(key: str) -> bool:
    """Whether the value of `key` must never be shown."""
    return (
        key.endswith("password")
        or "secret" in key
        or key in ("sasl.jaas.config", "sasl.oauthbearer.config", "ssl.key.pem", "ssl.keystore.key")
    )


@dataclass(frozen=True)
class ClientProperties:
    """Kafka client properties as the user wrote them (either dialect), and where from."""

    values: Mapping[str, str] = field(default_factory=dict)
    source: str = ""

    def __repr__(self) -> str:  # what a stray `log.info("%r", ...)` would show
        return f"ClientProperties({self.redacted()!r}, source={self.source!r})"

    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` if the file names the cluster (Confluent Cloud's do)."""
        return self.values.get("bootstrap.servers", "")

    @property
    def security_protocol(self) -> str:
        return self.values.get("security.protocol", "PLAINTEXT").upper()

    def redacted(self) -> dict[str, str]:
        return {k: REDACTED if is_secret(k) else v for k, v in sorted(self.values.items())}

    def summary(self) -> dict[str, str]:
        """What a start-up log line says about the connection: no secrets, no paths' content."""
        mechanism = self.values.get("sasl.mechanism") or self.values.get("sasl.mechanisms", "")
        described = {"security_protocol": self.security_protocol}
        if mechanism:
            described["sasl_mechanism"] = mechanism.upper()
        if self.source:
            described["kafka_config"] = self.source
        return described

    def librdkafka(self) -> dict[str, str]:
        """The properties for a librdkafka client (confluent-kafka), without bootstrap.servers."""
        given = dict(self.values)
        given.pop("bootstrap.servers", None)
        out = {k: v for k, v in given.items() if k not in _JAVA_ONLY}
        if "sasl.mechanism" in given:
            out.setdefault("sasl.mechanisms", given["sasl.mechanism"])
        if "sasl.jaas.config" in given:
            for key, value in _librdkafka_from_jaas(given["sasl.jaas.config"], given).items():
                out.setdefault(key, value)
        if "ssl.truststore.location" in given:
            kind = given.get("ssl.truststore.type", "JKS").upper()
            if kind != "PEM":
                raise ClientPropertiesError(
                    f"ssl.truststore.location is a {kind} truststore, which KQS's Kafka clients "
                    "(librdkafka) cannot read: give ssl.ca.location=<PEM file of the CA "
                    "certificates> (or ssl.truststore.type=PEM with a PEM file)"
                )
            out.setdefault("ssl.ca.location", given["ssl.truststore.location"])
        if "ssl.keystore.location" in given:
            kind = given.get("ssl.keystore.type", "PKCS12").upper()
            if kind == "PEM":  # one file with the key and the certificate chain
                del out["ssl.keystore.location"]
                out.setdefault("ssl.certificate.location", given["ssl.keystore.location"])
                out.setdefault("ssl.key.location", given["ssl.keystore.location"])
            elif kind != "PKCS12":
                raise ClientPropertiesError(
                    f"ssl.keystore.location is a {kind} keystore, which KQS's Kafka clients "
                    "(librdkafka) cannot read: give a PKCS12 keystore (ssl.keystore.type=PKCS12), "
                    "or ssl.certificate.location and ssl.key.location (PEM files)"
                )
        return out

    def java(self) -> dict[str, str]:
        """The security properties for a Java Kafka client (Spark's Kafka source and sink take
        them with a ``kafka.`` prefix): ``security.protocol``, ``sasl.*``, ``ssl.*``."""
        given = {
            k: v
            for k, v in self.values.items()
            if k.startswith(_ENV_FAMILIES) or k == "enable.ssl.certificate.verification"
        }
        out = {k: v for k, v in given.items() if k not in _LIBRDKAFKA_ONLY}
        mechanism = (given.get("sasl.mechanism") or given.get("sasl.mechanisms", "")).upper()
        if mechanism:
            out["sasl.mechanism"] = mechanism
        if "sasl.jaas.config" not in given:
            out.update(_java_login(mechanism, given))
        if "ssl.ca.location" in given and "ssl.truststore.location" not in given:
            if given["ssl.ca.location"] == "probe":
                pass  # the JVM's own truststore is Java's equivalent
            else:
                out["ssl.truststore.type"] = "PEM"
                out["ssl.truststore.location"] = given["ssl.ca.location"]
        if "ssl.certificate.location" in given and "ssl.keystore.location" not in given:
            # Inline PEM: Java's PEM keystore *file* requires an encrypted key, inline does not.
            out["ssl.keystore.type"] = "PEM"
            out["ssl.keystore.certificate.chain"] = _read(given, "ssl.certificate.location")
            out["ssl.keystore.key"] = _read(given, "ssl.key.location")
        elif "ssl.keystore.location" in given:
            out.setdefault("ssl.keystore.type", "PKCS12")  # librdkafka's only kind
        return out


def _read(given: Mapping[str, str], key: str) -> str:
    if key not in given:
        raise ClientPropertiesError(f"{key} is missing (it goes with ssl.certificate.location)")
    try:
        return Path(given[key]).read_text(encoding="ascii")
    except OSError as error:
        raise ClientPropertiesError(f"{key}: cannot read {given[key]}: {error.strerror}") from None


def _java_login(mechanism: str, given: Mapping[str, str]) -> dict[str, str]:
    """``sasl.jaas.config`` (and the login handler) from librdkafka's SASL keys."""
    if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and "sasl.username" in given:
        module = _PLAIN_MODULE if mechanism == "PLAIN" else _SCRAM_MODULE
        options = {"username": given["sasl.username"], "password": given.get("sasl.password", "")}
        return {"sasl.jaas.config": _jaas(module, options)}
    if mechanism == "OAUTHBEARER" and given.get("sasl.oauthbearer.method", "").lower() == "oidc":
        options = {
            "clientId": given.get("sasl.oauthbearer.client.id", ""),
            "clientSecret": given.get("sasl.oauthbearer.client.secret", ""),
        }
        if "sasl.oauthbearer.scope" in given:
            options["scope"] = given["sasl.oauthbearer.scope"]
        return {
            "sasl.jaas.config": _jaas(_OAUTH_MODULE, options),
            "sasl.login.callback.handler.class": _OAUTH_LOGIN_HANDLER,
        }
    return {}


def _jaas(module: str, options: Mapping[str, str]) -> str:
    quoted = " ".join(
        f'{key}="{value.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for key, value in options.items()
    )
    return f"{module} required {quoted};"


_JAAS = re.compile(r"^\s*(?P<module>[\w.$]+)\s+(?P<flag>\w+)(?P<options>.*?);?\s*$", re.S)
_JAAS_OPTION = re.compile(r"""(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'|([^\s;]+))""")


def _librdkafka_from_jaas(text: str, given: Mapping[str, str]) -> dict[str, str]:
    """librdkafka's SASL keys from a Java ``sasl.jaas.config`` (PLAIN, SCRAM, OAUTHBEARER)."""
    match = _JAAS.match(text)
    if match is None:
        raise ClientPropertiesError("sasl.jaas.config is not '<LoginModule> required k=\"v\" ...;'")
    options = {
        m.group(1): re.sub(r"\\(.)", r"\1", next(g for g in m.groups()[1:] if g is not None))
        for m in _JAAS_OPTION.finditer(match.group("options"))
    }
    module = match.group("module")
    if module in (_PLAIN_MODULE, _SCRAM_MODULE):
        if "username" not in options or "password" not in options:
            raise ClientPropertiesError("sasl.jaas.config: username and password are required")
        return {"sasl.username": options["username"], "sasl.password": options["password"]}
    if module == _OAUTH_MODULE:
        out = {"sasl.oauthbearer.method": "oidc"} if "clientId" in options else {}
        for java_key, key in (
            ("clientId", "sasl.oauthbearer.client.id"),
            ("clientSecret", "sasl.oauthbearer.client.secret"),
            ("scope", "sasl.oauthbearer.scope"),
        ):
            if java_key in options:
                out[key] = options[java_key]
        if out and "sasl.oauthbearer.token.endpoint.url" not in given:
            raise ClientPropertiesError(
                "OAUTHBEARER with clientId needs sasl.oauthbearer.token.endpoint.url"
            )
        return out
    raise ClientPropertiesError(
        f"sasl.jaas.config: {module} is not a login KQS's Kafka clients (librdkafka) can use: "
        "PlainLoginModule, ScramLoginModule or OAuthBearerLoginModule (OIDC client credentials)"
    )


# --------------------------------------------------------------------------- reading


def parse_properties(text: str) -> dict[str, str]:
    """A ``.properties`` file as java.util.Properties reads it: ``key=value``, ``key: value``
    or ``key value``; ``#``/``!`` comments; a trailing backslash continues the line; the
    escapes ``\\t \\n \\r \\f \\uXXXX`` and ``\\`` before any other character."""
    out: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.lstrip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # an odd number of backslashes: continued
            logical += line[:-1]
            continue
        logical += line
        key, value = _split_entry(logical)
        out[_unescape(key)] = _unescape(value)
        logical = ""
    if logical:
        key, value = _split_entry(logical)
        out[_unescape(key)] = _unescape(value)
    return out


def _split_entry(line: str) -> tuple[str, str]:
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\":
            index += 2
            continue
        if char in "=: \t\f":
            break
        index += 1
    key, rest = line[:index], line[index:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if code.startswith("u") and len(code) == 5:
            return chr(int(code[1:], 16))
        return _ESCAPES.get(code, code)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", one, text)


def from_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``KQS_KAFKA_<KEY>`` security settings as properties, named as Confluent's images name
    them: lower case, ``_`` → ``.``, ``__`` → ``_``, ``___`` → ``-``
    (``KQS_KAFKA_SASL_MECHANISM`` → ``sasl.mechanism``)."""
    out: dict[str, str] = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        suffix = name[len(ENV_PREFIX) :].lower()
        key = suffix.replace("___", "\0").replace("__", "\1").replace("_", ".")
        key = key.replace("\0", "-").replace("\1", "_")
        if key.startswith(_ENV_FAMILIES):
            out[key] = value
    return out


def load(
    path: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> ClientProperties:
    """The properties of `path` (else ``$KQS_KAFKA_CONFIG``, else none), overridden by the
    ``KQS_KAFKA_*`` security settings of `environ` (default: this process's environment)."""
    env = os.environ if environ is None else environ
    file = str(path or env.get(CONFIG_ENV, ""))
    values: dict[str, str] = {}
    if file:
        try:
            text = Path(file).expanduser().read_text(encoding="utf-8")
        except OSError as error:
            raise ClientPropertiesError(
                f"Kafka client properties {file}: {error.strerror}"
            ) from None
        values = parse_properties(text)
    values.update(from_environment(env))
    properties = ClientProperties(values, file)
    properties.librdkafka()  # refuse what cannot be used now, not at the first client
    return properties


# --------------------------------------------------------------------------- the registry

_BY_BOOTSTRAP: dict[str, dict[str, str]] = {}


def use(bootstrap: str, properties: ClientProperties) -> None:
    """Every client of `bootstrap` made from now on (through `connection`) uses `properties`."""
    if properties.values:
        _BY_BOOTSTRAP[bootstrap] = properties.librdkafka()
    else:
        _BY_BOOTSTRAP.pop(bootstrap, None)


def connection(bootstrap: str) -> dict[str, str]:
    """The start of every librdkafka client config of `bootstrap`: where and how to connect.

    Callers add their own keys after it, so KQS's settings (acks, idempotence, group ids)
    are never overridden by the user's file."""
    return {"bootstrap.servers": bootstrap, **_BY_BOOTSTRAP.get(bootstrap, {})}
