"""A private CA and a broker certificate for the dev stack's SASL_SSL listener, made with the ``cryptography``
package (a dependency of authlib, hence of every lakesink install; no openssl or keytool needed).

:func:`make_ca` writes ``ca.pem`` (the CA certificate a client trusts: ``kafka.ssl.ca.location``) and
``broker.p12`` (the broker's key and certificate, signed by the CA, with SAN ``IP:127.0.0.1,DNS:localhost``) into a
directory; :func:`truststore` writes the CA as a PKCS#12 or JKS trust store (Connect's ``ssl.truststore.*`` keys),
JKS through the JDK's ``keytool`` (there is no Python writer for it).
"""
from __future__ import annotations

import datetime as dt
import ipaddress
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from lakesink.errors import DevStackError

__all__ = ["CertificateAuthority", "make_ca", "truststore"]


@dataclass(frozen=True)
class CertificateAuthority:
    """Files of :func:`make_ca`: ``ca_pem`` (the CA certificate), ``broker_p12`` (PKCS#12, ``password``)."""

    ca_pem: Path
    broker_p12: Path
    password: str


def _name(cn: str):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca(directory: Path, days: int = 30, untrusted: bool = False) -> CertificateAuthority:
    """A fresh CA and a broker certificate it signs, in ``directory`` (created). ``untrusted``: for tests, the
    same files from a CA nobody is told about (a client trusting another CA refuses this broker)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import ExtendedKeyUsageOID

    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (x509.CertificateBuilder().subject_name(_name("lakesink dev CA")).issuer_name(_name("lakesink dev CA"))
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now).not_valid_after(now + dt.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False, data_encipherment=False,
                                            key_agreement=False, encipher_only=False, decipher_only=False),
                              critical=True)
               .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name("localhost")).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                        x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    password = secrets.token_urlsafe(12)
    ca_pem = directory / ("untrusted-ca.pem" if untrusted else "ca.pem")
    ca_pem.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    p12 = directory / "broker.p12"
    p12.write_bytes(pkcs12.serialize_key_and_certificates(
        b"broker", key, cert, [ca_cert], serialization.BestAvailableEncryption(password.encode())))
    p12.chmod(0o600)
    return CertificateAuthority(ca_pem, p12, password)


def truststore(ca_pem: Path, path: Path, kind: str, password: str) -> Path:
    """The CA of ``ca_pem`` as a trust store of ``kind`` (``PKCS12`` or ``JKS``) at ``path``, via ``keytool`` (a
    PKCS#12 trust store the JDK reads needs its trusted-certificate attribute, which keytool writes)."""
    keytool = shutil.which("keytool")
    if keytool is None:
        raise DevStackError("keytool (the JDK's) is not on PATH: it writes the JKS/PKCS12 trust stores")
    path.unlink(missing_ok=True)
    res = subprocess.run([keytool, "-importcert", "-noprompt", "-alias", "lakesink-dev-ca", "-file", str(ca_pem),
                          "-keystore", str(path), "-storetype", kind.upper(), "-storepass", password],
                         capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        raise DevStackError(f"keytool -importcert into {path} failed: {res.stderr.strip() or res.stdout.strip()}")
    return path
