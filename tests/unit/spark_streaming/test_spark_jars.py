"""Which resolved connector jars duplicate one PySpark ships: artifact names without versions."""

from __future__ import annotations

import pytest

from spark_streaming.jars import artifact_name


@pytest.mark.parametrize(
    ("jar", "artifact"),
    [
        ("kafka-clients-3.9.0.jar", "kafka-clients"),
        ("spark-sql-kafka-0-10_2.13-4.0.0.jar", "spark-sql-kafka-0-10_2.13"),
        ("spark-token-provider-kafka-0-10_2.13-4.0.0.jar", "spark-token-provider-kafka-0-10_2.13"),
        ("scala-parallel-collections_2.13-1.2.0.jar", "scala-parallel-collections_2.13"),
        ("zstd-jni-1.5.6-9.jar", "zstd-jni"),
        ("log4j-1.2-api-2.24.3.jar", "log4j-1.2-api"),
        ("commons-pool-1.5.4.jar", "commons-pool"),
        ("commons-pool2-2.12.0.jar", "commons-pool2"),
        (
            "netty-transport-native-epoll-4.1.118.Final-linux-x86_64.jar",
            "netty-transport-native-epoll",
        ),
        ("py4j-0.10.9.9.jar", "py4j"),
    ],
)
def test_a_jar_file_name_without_its_version_is_its_artifact(jar: str, artifact: str) -> None:
    assert artifact_name(jar) == artifact
