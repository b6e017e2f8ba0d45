"""Certificates made in the tests (`cryptography`): a throwaway CA, and the server and client
certificates it signs, as PEM files or a PKCS#12 keystore the JVM reads."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.support.harness import GatewayProcess, free_port


@dataclass(frozen=True)
class Pem:
    cert: Path
    key: Path


class CertificateAuthority:
    """A throwaway CA in `directory` and the certificates it signs (EC P-256, one day)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kqs test CA")])
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(self._name)
            .issuer_name(self._name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )
        self.cert = directory / "ca.pem"
        self.cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(
        self, name: str, hosts: Iterable[str] = (), server: bool = False
    ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(
                x509.Name(
                    [
                        x509.NameAttribute(NameOID.COMMON_NAME, name),
                        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kqs tests"),
                    ]
                )
            )
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                    if server
                    else [ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return key, builder.sign(self._key, hashes.SHA256())

    def pem(self, name: str, hosts: Iterable[str] = (), server: bool = False) -> Pem:
        """A certificate (chain: itself) and its unencrypted PKCS#8 key, as PEM files."""
        key, cert = self.issue(name, hosts, server)
        paths = Pem(self.directory / f"{name}.pem", self.directory / f"{name}.key")
        paths.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        paths.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return paths

    def pkcs12(self, name: str, password: str, hosts: Iterable[str] = ()) -> Path:
        """A PKCS#12 keystore (key, certificate, CA) the JVM reads (3DES/SHA-1 PBE: any JDK)."""
        key, cert = self.issue(name, hosts, server=True)
        encryption = (
            serialization.PrivateFormat.PKCS12.encryption_builder()
            .kdf_rounds(2048)
            .key_cert_algorithm(pkcs12.PBES.PBESv1SHA1And3KeyTripleDESCBC)
            .hmac_hash(hashes.SHA1())
            .build(password.encode())
        )
        path = self.directory / f"{name}.p12"
        path.write_bytes(
            pkcs12.serialize_key_and_certificates(
                name.encode(), key, cert, [self._cert], encryption
            )
        )
        return path


def https_gateway(
    ca: CertificateAuthority, kafka_bootstrap: str, work: Path, front: str = "lean"
) -> GatewayProcess:
    """A gateway (not started) serving HTTPS at https://localhost:<port> with a certificate
    `ca` signed, and plain HTTP on another port (`--http-port`), behind `front`."""
    server = ca.pem("localhost", hosts=("localhost", "127.0.0.1"), server=True)
    return GatewayProcess(
        work,
        kafka_bootstrap,
        env={"KQS_HTTP_FRONT": front, "KQS_TLS_CERT": str(server.cert)},
        args=["--tls-key", str(server.key), "--http-port", str(free_port())],
        tls_ca=ca.cert,
    )
