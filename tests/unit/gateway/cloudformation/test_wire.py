"""The awsQuery wire of CloudFormation: member lists in, `<member>` lists out."""

from __future__ import annotations

from gateway.cloudformation.wire import CLOUDFORMATION_NAMESPACE, render_result, to_tree


def test_member_lists_become_lists_in_member_order() -> None:
    tree = to_tree(
        [
            ("StackName", "s"),
            ("Parameters.member.2.ParameterKey", "B"),
            ("Parameters.member.1.ParameterKey", "A"),
            ("Parameters.member.1.ParameterValue", "1"),
            ("Parameters.member.2.UsePreviousValue", "true"),
            ("Capabilities.member.1", "CAPABILITY_IAM"),
        ]
    )
    assert tree == {
        "StackName": "s",
        "Parameters": [
            {"ParameterKey": "A", "ParameterValue": "1"},
            {"ParameterKey": "B", "UsePreviousValue": "true"},
        ],
        "Capabilities": ["CAPABILITY_IAM"],
    }


def test_results_render_lists_as_members_and_skip_absent_values() -> None:
    xml = render_result(
        "DescribeStacks",
        {
            "Stacks": [
                {"StackName": "s<1>", "Outputs": [], "Description": None, "DisableRollback": False}
            ]
        },
        "rid",
        CLOUDFORMATION_NAMESPACE,
    )
    assert (
        "<DescribeStacksResult><Stacks><member><StackName>s&lt;1&gt;</StackName><Outputs></Outputs>"
        "<DisableRollback>false</DisableRollback></member></Stacks></DescribeStacksResult>"
    ) in xml
