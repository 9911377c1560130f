"""Mutual-TLS credentials of a cross-graph federation run as processes (docs/cross_graph.md, "Processes").

Every party holds a certificate whose common name and DNS name are its holder name, signed by the
federation's certificate authority (CA), and its private key. A party accepts a connection only from
a peer whose certificate the CA signed, and takes a message only if the certificate's common name is
the message's sender (:mod:`textkg.federated.cross_graph.transport`). Who runs the CA is the
federation's choice (one member, or a consortium); textkg only reads PEM files.

:func:`write_federation_certs` makes a throwaway CA and one certificate per party (ECDSA P-256, one
day) for a run on one machine (``federate --processes``) and for the tests.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from pathlib import Path

from textkg.errors import ConfigError

#: the largest PEM file a party reads (a certificate or a key is a few hundred bytes)
MAX_PEM_BYTES = 64 * 1024


@dataclass(frozen=True)
class Credentials:
    """One party's PEM bytes: the federation's CA, its certificate and its private key (PRIVATE)."""

    ca: bytes
    cert: bytes
    key: bytes

    @classmethod
    def from_files(cls, ca: str | Path, cert: str | Path, key: str | Path) -> Credentials:
        """Read the three PEM files, each bounded in size and checked to be PEM."""
        return cls(*(_read_pem(Path(p), field) for p, field in ((ca, "ca"), (cert, "cert"), (key, "key"))))


def _read_pem(path: Path, field: str) -> bytes:
    if not path.is_file():
        raise ConfigError("no such file", file=path, field=field)
    if path.stat().st_size > MAX_PEM_BYTES:
        raise ConfigError(f"larger than {MAX_PEM_BYTES} bytes: not a PEM certificate or key", file=path, field=field)
    data = path.read_bytes()
    if b"-----BEGIN " not in data:
        raise ConfigError("not a PEM file", file=path, field=field)
    return data


def write_federation_certs(names: list[str], folder: Path, *, ca_name: str = "textkg cross-graph CA") -> dict:
    """A fresh CA and a certificate per party under ``folder``: ``ca.pem``, ``<name>.pem``, ``<name>.key``.

    Returns ``{name: Credentials}``. Keys are written with mode 0600."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=1)

    def pem_key(key) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ca_name)])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_subject)
        .issuer_name(ca_subject)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    (folder / "ca.pem").write_bytes(ca_pem)
    out = {}
    for name in names:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        cert_pem, key_pem = cert.public_bytes(serialization.Encoding.PEM), pem_key(key)
        (folder / f"{name}.pem").write_bytes(cert_pem)
        key_path = folder / f"{name}.key"
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key_pem)
        out[name] = Credentials(ca_pem, cert_pem, key_pem)
    return out
