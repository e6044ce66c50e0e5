"""TLS and request limits: `serve run --certfile/--keyfile` serves HTTPS that a
desk trusting the team's own certificate authority syncs with; `sync configure` refuses to send
a token over plain http:// to another machine; a server answers 429 with Retry-After past its
per-token and per-address limits, and the client waits it out without counting a failure."""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import sys
import uuid

import httpx
import pytest

from sync.client import ClientFactory, SyncClient
from sync.server.limits import Buckets, Rate, client_key
from sync.transport import RetryPolicy, Untrusted, token_in_clear
from tests.sync.helpers import (
    ProcessServer,
    ThreadServer,
    add_account,
    fill_outbox,
    prepare_desk,
    publish_basics,
    server_counts,
    server_database,
)


@pytest.fixture
def dynadesk(monkeypatch, capsys):
    """The `dynadesk` command in this process (what the console script runs, without its log
    file): returns (exit code, stdout, stderr)."""
    import io

    import app.cli.desk

    monkeypatch.setattr(app.cli.desk, "setup_logging", lambda root: root)

    def run(*args, data_dir, input: str = "") -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "stdin", io.StringIO(input))
        capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            app.cli.main(["--data-dir", str(data_dir), *args])
        out, err = capsys.readouterr()
        return exited.value.code, out, err

    return run


def make_certificates(folder):
    """A team's own certificate authority and a server certificate it signed for 127.0.0.1."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Research team CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    server = (x509.CertificateBuilder()
              .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sync.research.example")]))
              .issuer_name(ca_name).public_key(server_key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
              .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                          x509.DNSName("localhost")]), critical=False)
              .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
              .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
              .sign(ca_key, hashes.SHA256()))
    paths = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(server_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()))
    return paths


def test_serve_run_with_tls_and_a_desk_that_trusts_the_teams_authority(tmp_path, dynadesk):
    ca, certificate, key = make_certificates(tmp_path)
    database = tmp_path / "server" / "server.sqlite"
    db = server_database(f"sqlite:///{database}")
    owner = add_account(db, "Olga Owner", "owner", "A")
    ann = add_account(db, "Ann Annotator", "annotator", "A")
    server = ProcessServer(f"sqlite:///{database}", tmp_path / "server", tls=(certificate, key), ca_file=ca)
    try:
        server.start()
        assert server.url.startswith("https://")
        with pytest.raises(httpx.ConnectError):  # the usual authorities do not vouch for the team's own
            httpx.get(f"{server.url}/openapi.json", timeout=10)
        publish_basics(server.url, owner, tmp_path, verify=ssl.create_default_context(cafile=str(ca)))

        desk = prepare_desk(tmp_path / "desk", ann)
        fill_outbox(desk, ann.id, 5, seed=4)
        with SyncClient(desk, server.url, ann.token, ca_file="") as client, pytest.raises(Untrusted) as refused:
            client.run(fetch_models=False)
        assert "certificate is not trusted" in str(refused.value) and "--ca-file" in str(refused.value)
        desk.close()

        code, out, err = dynadesk("sync", "configure", "--url", server.url, "--ca-file", str(ca), "--token-stdin",
                                  data_dir=tmp_path / "desk", input=ann.token + "\n")
        assert code == 0, err
        assert "Ann Annotator (annotator, team A)" in out and str(ca) in out
        assert json.loads((tmp_path / "desk" / "settings.json").read_text())["server_ca_file"] == str(ca)
        (tmp_path / "junk.pem").write_text("not a certificate\n")
        code, out, err = dynadesk("sync", "configure", "--ca-file", str(tmp_path / "junk.pem"), "--no-test",
                                  data_dir=tmp_path / "desk")
        assert code == 1 and "is not a PEM certificate" in err  # and the good one stays
        assert json.loads((tmp_path / "desk" / "settings.json").read_text())["server_ca_file"] == str(ca)

        from app.core.desk import Desk

        with Desk(tmp_path / "desk") as desk:  # the desk's settings say whom to trust: no option needed
            with ClientFactory(desk).configured() as client:
                report = client.run(fetch_models=False)
        assert report.pushed == 5 and not report.problems
        assert server_counts(db)["examples"] == 5
    finally:
        server.stop()
        db.close()


def test_serve_run_refuses_a_certificate_and_key_that_do_not_belong_together(tmp_path):
    from app.cli.serve import _check_tls_pair
    from app.core.errors import DynadeskError

    _, certificate, _ = make_certificates(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    _, _, wrong_key = make_certificates(other)
    with pytest.raises(DynadeskError, match="cannot be used together"):
        _check_tls_pair(str(certificate), str(wrong_key))
    with pytest.raises(DynadeskError, match="cannot be used together"):
        _check_tls_pair(str(tmp_path / "ca.pem"), str(tmp_path / "ca.pem"))  # a certificate is no key


@pytest.mark.parametrize("url, in_clear", [
    ("http://sync.example.org", True), ("http://10.0.0.5:8765", True), ("http://[2001:db8::1]:8765", True),
    ("http://127.0.0.1:8765", False), ("http://127.9.8.7", False), ("http://localhost:8765", False),
    ("http://[::1]:8765", False), ("https://sync.example.org", False),
])
def test_which_urls_would_carry_the_token_in_clear(url, in_clear):
    assert token_in_clear(url) is in_clear


def test_configure_refuses_plain_http_to_another_machine_unless_told_insecure(tmp_path, dynadesk):
    desk_dir = tmp_path / "desk"
    code, out, err = dynadesk("sync", "configure", "--url", "http://sync.example.org:8765", "--token-stdin",
                              data_dir=desk_dir, input="ddk_secret\n")
    assert code == 1
    assert "unencrypted" in err and "--insecure" in err and "Traceback" not in err + out
    settings = desk_dir / "settings.json"
    assert not settings.exists() or json.loads(settings.read_text()).get("server_url") is None
    assert not (desk_dir / "sync-token.json").exists()  # the token was not kept either

    code, out, err = dynadesk("sync", "configure", "--url", "http://sync.example.org:8765", "--insecure",
                              "--no-test", data_dir=desk_dir)
    assert code == 0, err
    assert json.loads(settings.read_text())["server_url"] == "http://sync.example.org:8765"


def test_rates_and_buckets():
    assert Rate.parse("1200/min") == Rate(1200, 60.0) and Rate.parse("20 / s") == Rate(20, 1.0)
    assert Rate.parse("0").unlimited and str(Rate.parse("50000/hour")) == "50000/hour"
    for bad in ("fast", "10", "-1/s", "5/fortnight", "0/s"):
        with pytest.raises(ValueError, match="is not a request limit"):
            Rate.parse(bad)
    now = [100.0]
    buckets = Buckets(Rate(2, 1.0), clock=lambda: now[0])
    for _ in range(2):
        assert buckets.wait("k") == 0
        buckets.take("k")
    assert buckets.wait("k") == pytest.approx(0.5) and buckets.wait("other") == 0
    now[0] += 0.5
    assert buckets.wait("k") == 0
    # IPv6 clients count by their /64: a host cannot slip the limit by changing its last bits.
    assert client_key("2001:db8:1:2::5") == client_key("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert client_key("::ffff:10.0.0.7") == client_key("10.0.0.7") == "10.0.0.7"


def test_a_server_over_its_limits_answers_429_with_retry_after(tmp_path):
    db = server_database(f"sqlite:///{tmp_path / 'server' / 'server.sqlite'}")
    ann = add_account(db, "Ann Annotator", "annotator", "A")
    bob = add_account(db, "Bob Annotator", "annotator", "A")
    server = ThreadServer(db, tmp_path / "server", per_token=Rate(3, 60.0), per_address=Rate(5, 60.0))
    try:
        def me(account):
            return httpx.get(f"{server.url}/v1/me", headers={"Authorization": f"Bearer {account.token}"}, timeout=10)

        assert [me(ann).status_code for _ in range(3)] == [200, 200, 200]
        limited = me(ann)
        assert limited.status_code == 429
        assert int(limited.headers["Retry-After"]) >= 1 and "Too many requests" in limited.json()["detail"]
        assert [me(bob).status_code for _ in range(3)] == [200, 200, 429]  # another token has its own allowance,
        # but the address has used its 5 (a refused request uses none)
        assert httpx.get(f"{server.url}/openapi.json", timeout=10).status_code == 200  # only /v1 is limited
    finally:
        server.stop()
        db.close()


def test_the_client_waits_out_429s_without_counting_a_failure(tmp_path):
    db = server_database(f"sqlite:///{tmp_path / 'server' / 'server.sqlite'}")
    owner = add_account(db, "Olga Owner", "owner", "A")
    ann = add_account(db, "Ann Annotator", "annotator", "A", person_id=uuid.uuid4())
    server = ThreadServer(db, tmp_path / "server", per_token=Rate(2, 1.0), per_address=Rate(0, 1.0))
    desk = prepare_desk(tmp_path / "desk", ann)
    try:
        publish_basics(server.url, owner, tmp_path)
        fill_outbox(desk, ann.id, 12, seed=8)
        for _ in range(2):  # the desk's allowance is used up (by another of Ann's tools, say)
            httpx.get(f"{server.url}/v1/me", headers={"Authorization": f"Bearer {ann.token}"}, timeout=10)
        # One attempt per request: a 429 counted as a failure would stop the sync at once.
        with SyncClient(desk, server.url, ann.token, batch_size=12, page_size=5,
                        policy=RetryPolicy(attempts=1)) as client:
            report = client.run(fetch_models=False)
        assert report.paced > 0  # the server did pace this desk...
        assert report.retries == 0 and not report.problems  # ...and nothing counted as a failure
        assert report.pushed == 12 and server_counts(db)["examples"] == 12
    finally:
        desk.close()
        server.stop()
        db.close()
