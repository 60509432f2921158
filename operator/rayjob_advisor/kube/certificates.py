"""Certificates the operator keeps itself (the chart's ``certificates.mode: operator``), and the CA handed to jobs.

For GitOps (``helm template``, Argo CD), where the chart cannot keep a key
across renders: the chart renders the Secret without data and the webhook
configuration without ``caBundle``, and the controller's leader keeps them
filled. The Secret (``tls_secret``) holds a long-lived CA (``ca.crt``,
``ca.key``) and a serving certificate signed by it for ``tls_server_names``
(``tls.crt``, ``tls.key``), made with ``cryptography`` (kopf's self-signed
certificates have no CA to hand to the API server and to jobs). A serving
certificate is issued anew when a third of its life is left, when its names
differ, or when the CA changed; the CA only when a year of its ten is left.
Renewals keep the CA, so the ``caBundle`` the API server holds and the CA
running jobs hold stay valid; the servers load a renewed certificate live
(``serving``).

In every mode, the CA (the Secret's, or ``tls_ca_file``) is published as a
ConfigMap (``tls_ca_configmap``, key ``ca.crt``) in each namespace with a
RayJob the ``progress`` hook wires, as ``kube-root-ca.crt`` is: the hook
mounts it (``optional``), so the kubelet brings a new CA to running jobs.
Every ``CHECK_SECONDS`` the leader compares and writes what differs; an API
error is one log line, and the next check tries again.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import ipaddress
import logging
import pathlib
from collections.abc import Callable, Collection, Mapping, Sequence

import kubernetes
from cryptography import exceptions, x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from rayjob_advisor.background import BackgroundLoop
from rayjob_advisor.kube import kubeapi
from rayjob_advisor.kube.config import OperatorConfig

CHECK_SECONDS = 60.0
CA_LIFETIME = dt.timedelta(days=3650)
CA_RENEW_BEFORE = dt.timedelta(days=365)  # a CA with less left is replaced, with its serving certificate
SERVING_LIFETIME = dt.timedelta(days=90)
SERVING_RENEW_BEFORE = SERVING_LIFETIME / 3  # as cert-manager's default: renewed with a third of its life left
BACKDATE = dt.timedelta(minutes=5)  # valid from a little before now: clocks of the cluster's nodes differ
CA_KEY, CA_CERT, TLS_CERT, TLS_KEY = "ca.key", "ca.crt", "tls.crt", "tls.key"
logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def load(cls, data: Mapping[str, bytes], cert: str, key: str) -> KeyPair | None:
        """The pair under the keys ``cert`` and ``key`` of a Secret's data; None when absent, unreadable, or when
        the key is not the certificate's."""
        try:
            certificate = x509.load_pem_x509_certificate(data[cert])
            private = serialization.load_pem_private_key(data[key], password=None)
        except (KeyError, ValueError, TypeError):
            return None
        if not isinstance(private, ec.EllipticCurvePrivateKey) or private.public_key() != certificate.public_key():
            return None
        return cls(certificate, private)

    def pem(self) -> tuple[bytes, bytes]:
        """The certificate and the key (PKCS #8, unencrypted), PEM."""
        key = self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return self.cert.public_bytes(serialization.Encoding.PEM), key


def make_ca(common_name: str, now: dt.datetime) -> KeyPair:
    """A new CA (ECDSA P-256) valid ``CA_LIFETIME``, which signs serving certificates only."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        _builder(name, name, key.public_key(), now, CA_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(key_cert_sign=True), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert, key)


def issue(ca: KeyPair, names: Sequence[str], now: dt.datetime) -> KeyPair:
    """A serving certificate for ``names`` (DNS names or IP addresses) signed by ``ca``, valid ``SERVING_LIFETIME``."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0][:64])])
    cert = (
        _builder(subject, ca.cert.subject, key.public_key(), now, SERVING_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(digital_signature=True), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([_general_name(name) for name in names]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    return KeyPair(cert, key)


def _builder(
    subject: x509.Name, issuer: x509.Name, public: ec.EllipticCurvePublicKey, now: dt.datetime, life: dt.timedelta
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + life)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
    )


def _usage(*, key_cert_sign: bool = False, digital_signature: bool = False) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=digital_signature, content_commitment=False, key_encipherment=False,
        data_encipherment=False, key_agreement=False, key_cert_sign=key_cert_sign, crl_sign=key_cert_sign,
        encipher_only=False, decipher_only=False,
    )  # fmt: skip


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _names(cert: x509.Certificate) -> set[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {str(name.value) for name in san if isinstance(name, x509.DNSName | x509.IPAddress)}


def _serves(leaf: KeyPair, ca: KeyPair, names: Collection[str], now: dt.datetime) -> bool:
    """Whether ``leaf`` may go on serving: signed by ``ca``, for exactly ``names``, with a third of its life left."""
    try:
        leaf.cert.verify_directly_issued_by(ca.cert)
    except (ValueError, TypeError, exceptions.InvalidSignature):
        return False
    return _names(leaf.cert) == {str(_general_name(name).value) for name in names} and (
        leaf.cert.not_valid_after_utc - now > SERVING_RENEW_BEFORE
    )


def renewed(data: Mapping[str, bytes], names: Sequence[str], ca_name: str, now: dt.datetime) -> dict[str, bytes] | None:
    """The Secret's data as it must be now (CA and serving certificate, PEM); None when ``data`` is that already.

    The CA is kept unless it is missing, unreadable or within ``CA_RENEW_BEFORE`` of its end; the serving
    certificate unless ``_serves`` says otherwise.
    """
    ca = KeyPair.load(data, CA_CERT, CA_KEY)
    fresh_ca = ca is None or ca.cert.not_valid_after_utc - now <= CA_RENEW_BEFORE
    if ca is None or fresh_ca:
        ca = make_ca(ca_name, now)
    leaf = KeyPair.load(data, TLS_CERT, TLS_KEY)
    if not fresh_ca and leaf is not None and _serves(leaf, ca, names, now):
        return None
    leaf = issue(ca, names, now)
    (ca_cert, ca_key), (cert, key) = ca.pem(), leaf.pem()
    return {CA_CERT: ca_cert, CA_KEY: ca_key, TLS_CERT: cert, TLS_KEY: key}


class Keeper(BackgroundLoop):
    """The leader's loop (``leads``): the operator's Secret and the webhook's ``caBundle`` (``certificates.mode:
    operator``), and the CA's ConfigMap in ``namespaces()`` (any mode), checked every ``CHECK_SECONDS``."""

    def __init__(
        self,
        api: kubernetes.client.CustomObjectsApi,
        config: OperatorConfig,
        leads: Callable[[], bool],
        namespaces: Callable[[], Collection[str]],
        now: Callable[[], dt.datetime],
    ) -> None:
        super().__init__("certificates", CHECK_SECONDS)
        self.api, self.config, self.leads, self.namespaces, self.now = api, config, leads, namespaces, now

    def step(self) -> None:
        if not self.leads():
            return
        ca = self._kept_ca() if self.config.tls_secret else self._mounted_ca()
        if ca is None:
            return
        if self.config.webhook_configuration:
            self._try(f"the caBundle of {self.config.webhook_configuration}", kubeapi.set_ca_bundle,
                      self.config.webhook_configuration, ca)  # fmt: skip
        if self.config.tls_ca_configmap:
            for namespace in sorted(self.namespaces()):
                self._try(f"ConfigMap {namespace}/{self.config.tls_ca_configmap}", kubeapi.publish_ca, namespace,
                          self.config.tls_ca_configmap, ca)  # fmt: skip

    def _kept_ca(self) -> bytes | None:
        """The CA of the Secret, renewed there first if due (``renewed``); None when it cannot be read or written."""
        assert self.config.tls_secret is not None
        namespace, _, name = self.config.tls_secret.partition("/")
        try:
            data, version = kubeapi.read_secret(self.api, namespace, name)
            wanted = renewed(data, self.config.tls_server_names, f"{name}-ca", self.now())
            if wanted is not None:
                kubeapi.write_secret(self.api, namespace, name, wanted, version)
                logger.info("wrote a new serving certificate into Secret %s for %s", self.config.tls_secret,
                            ", ".join(self.config.tls_server_names))  # fmt: skip
                data = wanted
        except Exception as exc:  # noqa: BLE001 - one line, or a bug's traceback; the next check tries again
            self._failed(f"Secret {self.config.tls_secret}", exc)
            return None
        self.succeeded()
        return data[CA_CERT]

    def _mounted_ca(self) -> bytes | None:
        """The CA of the mounted certificate (``tls_ca_file``: cert-manager's or the chart's); None when unreadable."""
        if not self.config.tls_ca_file:
            return None
        try:
            ca = pathlib.Path(self.config.tls_ca_file).read_bytes()
        except OSError as exc:
            self._failed(f"the CA file {self.config.tls_ca_file}", exc)
            return None
        if b"PRIVATE KEY" in ca:  # a CA file is public: a key there is a misconfiguration, never published
            self._failed(f"the CA file {self.config.tls_ca_file}", ValueError("it holds a private key"))
            return None
        return ca

    def _try(self, what: str, write: Callable[..., None], *args: object) -> None:
        try:
            write(self.api, *args)
        except Exception as exc:  # noqa: BLE001 - one line, or a bug's traceback; the next check tries again
            self._failed(what, exc)
        else:
            self.succeeded()

    def _failed(self, what: str, exc: Exception) -> None:
        """An API error, or an unreadable file, is one log line (the next check tries again); anything else a bug."""
        brief = kubeapi.failure(exc) or (str(exc) if isinstance(exc, OSError | ValueError) else None)
        self.failed(what, brief)
