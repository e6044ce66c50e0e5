"""The one map from what the server answered (or did not) to the error a desk raises: every refusal status
to its type with the server's own words, a page that is not the server's with its status, and a server that
cannot be reached, drops the connection, never answers or is not trusted, each with a sentence."""

from __future__ import annotations

import hashlib
import socket
import threading
import uuid

import httpx
import pytest

from sync.client import SyncClient
from sync.transport import (
    REFUSALS,
    AuthError,
    Conflict,
    Interrupted,
    NotAllowed,
    NotOnServer,
    Offline,
    Refused,
    Rejected,
    RetryPolicy,
    SyncHandle,
    TooLarge,
    refusal,
)
from tests.sync.helpers import prepare_desk
from tests.sync.test_client import QUICK, free_port

IMPATIENT = RetryPolicy(attempts=2, first_delay=0.01, max_delay=0.02, timeout=0.5, connect_timeout=0.5)


def answer(status: int, **kwargs) -> httpx.Response:
    return httpx.Response(status, request=httpx.Request("POST", "https://sync.example/v1/x"), **kwargs)


@pytest.mark.parametrize("status, kind", [(400, Rejected), (403, NotAllowed), (404, NotOnServer), (409, Conflict),
                                          (413, TooLarge), (422, Rejected)])
def test_each_refusal_status_has_its_type_and_the_servers_own_words(status, kind):
    assert REFUSALS[status] is kind and issubclass(kind, Refused)
    reason = {"detail": "Proposal 7 was decided already."}
    bare = refusal(answer(status, json=reason))
    assert type(bare) is kind and str(bare) == "Proposal 7 was decided already."
    named = refusal(answer(status, json=reason), "the decision")
    assert type(named) is kind and str(named) == "The server refused the decision: Proposal 7 was decided already."
    # a proxy's page, or only the status's name (a route an older server lacks): the status is said with it
    page = refusal(answer(status, text="<html>gateway says no</html>"), "the decision")
    assert type(page) is kind and str(page) == f"The server answered HTTP {status}: <html>gateway says no</html>"
    phrase = answer(status).reason_phrase
    assert str(refusal(answer(status, json={"detail": phrase}))) == f"The server answered HTTP {status}: {phrase}"


def test_a_refused_token_and_statuses_outside_the_protocol():
    token = refusal(answer(401, json={"detail": "Unknown token."}), "the push")
    assert type(token) is AuthError
    assert str(token) == "The server refused the sync token: Unknown token. Check the token in the sync settings."
    odd = refusal(answer(418, json={"detail": "I am a teapot."}))
    assert type(odd) is Refused and str(odd) == "The server answered HTTP 418: I am a teapot."


def test_requests_to_a_real_server_raise_what_the_map_says(team, tmp_path):
    desk = prepare_desk(tmp_path / "desk", team.ann)
    with SyncClient(desk, team.url, team.ann.token, policy=QUICK) as client:
        assert client.request("GET", "/me").json()["display_name"] == "Ann Annotator"
        missing = uuid.uuid4()
        with pytest.raises(NotOnServer) as unknown:
            client.request("GET", f"/proposals/{missing}")
        assert str(missing) in str(unknown.value) and "HTTP" not in str(unknown.value)
        # a status the caller handles comes back as the answer
        assert client.request("GET", f"/proposals/{missing}", ok=(200, 404)).status_code == 404
        with pytest.raises(NotOnServer, match=r"^The server answered HTTP 404: Not Found$"):
            client.request("GET", "/no-such-endpoint")
        with pytest.raises(NotOnServer, match="No file with sha256"):
            client.download_blob("0" * 64, tmp_path / "blob")
        assert not (tmp_path / "blob").exists() and not (tmp_path / "blob.part").exists()
        model = tmp_path / "model.onnx"
        model.write_bytes(b"weights")
        with pytest.raises(NotAllowed, match=r"^The server refused model\.onnx: Only owners and leads upload"):
            client.upload_blob(model, hashlib.sha256(b"weights").hexdigest(), SyncHandle(), what="model.onnx")
    with SyncClient(desk, team.url, team.lead.token, policy=QUICK) as client:
        with pytest.raises(Rejected, match=r"^The server refused model\.onnx: .*not the file"):
            client.upload_blob(model, hashlib.sha256(b"other weights").hexdigest(), SyncHandle(), what="model.onnx")
    with SyncClient(desk, team.url, "ddk_not-a-token", policy=QUICK) as client:
        with pytest.raises(AuthError, match="refused the sync token"):
            client.request("GET", "/me")
    desk.close()


class Misbehaving:
    """A loopback "server" that reads each request and then either drops the connection without an answer
    or keeps it open and never answers."""

    def __init__(self, drop: bool):
        self.drop = drop
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.held: list[socket.socket] = []
        self.requests = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.recv(65536)
            self.requests += 1
            if self.drop:
                conn.close()
            else:
                self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.mark.parametrize("drop, said", [(True, "the connection dropped (RemoteProtocolError"),
                                        (False, "no answer within the time allowed (ReadTimeout")])
def test_a_dropped_connection_or_a_server_that_never_answers_is_retried_then_said(desk, drop, said):
    server = Misbehaving(drop)
    try:
        with SyncClient(desk, server.url, "ddk_token", policy=IMPATIENT) as client:
            with pytest.raises(Interrupted) as stopped:
                client.request("GET", "/changes")
            assert client.retries == 1 and server.requests == 2
    finally:
        server.close()
    assert str(stopped.value).startswith(f"The sync stopped after 2 attempts ({said}")
    assert str(stopped.value).endswith("the next sync resumes where this one stopped.")


def test_a_server_that_cannot_be_reached_is_offline_with_a_sentence(desk):
    with SyncClient(desk, f"http://127.0.0.1:{free_port()}", "ddk_token", policy=IMPATIENT) as client:
        with pytest.raises(Offline) as offline:
            client.request("GET", "/me")
    assert "cannot be reached (no connection (ConnectError" in str(offline.value)
    assert "Your work stays queued" in str(offline.value)
