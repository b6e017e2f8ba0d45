"""HTTPS on the gateway's port (`kqs serve --tls-cert FILE --tls-key FILE`).

The TLS layer is the event loop's (`ssl=` on the listening server), under either HTTP front,
so everything past the handshake (the parsers, SigV4, receipt handles, presigned URLs) is
the same code over HTTP and HTTPS; a request only learns its scheme (`request.scheme`,
`request.secure`), which the queue URLs it is answered with and `aws:SecureTransport` use.
"""

from __future__ import annotations

import ssl


class TlsConfigError(ValueError):
    """The certificate or key cannot be used (the message names the files, not their content)."""


def server_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """The context of the HTTPS port: TLS 1.2 and later, Python's default ciphers."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert_file, key_file or None)
    except (OSError, ssl.SSLError) as error:
        raise TlsConfigError(
            f"--tls-cert {cert_file} / --tls-key {key_file or '(in the certificate file)'}: "
            f"{getattr(error, 'strerror', None) or error.__class__.__name__}: "
            "give a PEM certificate chain and its unencrypted PEM private key"
        ) from None
    return context


def peer_client_context(cert_file: str, peer_ca_file: str = "") -> ssl.SSLContext:
    """How one gateway calls another over HTTPS (several gateways, `gateway/cluster/forwarding.py`):
    the system's CAs, the certificates of the gateway's own certificate file as trust anchors
    (a self-signed certificate, or one chain, shared by the group), and `peer_ca_file`'s
    (`--tls-peer-ca`: a private CA that signed each gateway its own certificate). The other
    gateway's certificate must name the host of its advertised URL (KQS_ADVERTISED_URL)."""
    context = ssl.create_default_context()
    for option, path in (("--tls-cert", cert_file), ("--tls-peer-ca", peer_ca_file)):
        if not path:
            continue
        try:
            context.load_verify_locations(cafile=path)
        except (OSError, ssl.SSLError) as error:
            raise TlsConfigError(
                f"{option} {path}: "
                f"{getattr(error, 'strerror', None) or error.__class__.__name__}: "
                "give PEM certificates"
            ) from None
    # A file may hold a CA-signed leaf or an intermediate rather than a root: trust it as it is.
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    return context
