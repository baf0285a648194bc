"""model_sync/sandbox/s3server.py's MotoS3Server (and its launcher, model_sync/sandbox/moto_s3.py), on real
processes on 127.0.0.1: it answers S3 over HTTP and enforces both conditional writes; stop() is an
outage (connections refused, the one in flight cut) after which start() serves the same objects on
the same port; shutdown() and its owner's exit end the process; a GET racing a PUT of one key never
fails nor tears (bench/s3/race.py's race, shortened)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest

from bench.s3.race import BUCKET, race
from model_sync import environments
from model_sync.contract import layout
from model_sync.s3 import clients
from model_sync.s3.bucket import Bucket
from model_sync.sandbox.procs import LOOPBACK, wait_until
from model_sync.sandbox.s3server import MotoS3Server
from tests.support.triton import s3_client

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def moto(tmp_path: Path) -> Iterator[MotoS3Server]:
    server = MotoS3Server(tmp_path / "s3", tmp_path / "s3.log")
    try:
        yield server
    finally:
        server.shutdown()


def _one_try(server: MotoS3Server) -> Any:
    """A client that does not retry: what it sees is what the server answered."""
    import boto3
    from botocore.config import Config

    return boto3.session.Session(
        aws_access_key_id="any", aws_secret_access_key="any", region_name=server.region
    ).client(
        "s3", endpoint_url=server.endpoint_url, config=Config(retries={"total_max_attempts": 1}, connect_timeout=2)
    )


def _refused(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex((LOOPBACK, port)) != 0


def test_it_answers_s3_over_http_creates_the_buckets_named_before_start_and_enforces_both_conditions(
    moto: MotoS3Server,
) -> None:
    moto.create_buckets("models-early")
    assert moto.process is None  # remembered: nothing runs yet
    moto.start()
    moto.create_buckets("models-late")  # created at once, the server being up
    client = s3_client(moto)
    assert {b["Name"] for b in client.list_buckets()["Buckets"]} == {"models-early", "models-late"}
    client.put_object(Bucket="models-early", Key="a/b.json", Body=b"{}")
    assert client.get_object(Bucket="models-early", Key="a/b.json")["Body"].read() == b"{}"
    session = clients.new_session(moto.region)
    session.set_credentials("any", "any")  # moto accepts any
    repo = Bucket(
        environments.Environment("m", layout.Root("models-late"), moto.endpoint_url, moto.region), session=session
    )
    assert (repo.conditional_writes_enforced(), repo.if_match_enforced()) == (True, True)
    assert repo.ignored_conditions() is None
    with pytest.raises(RuntimeError, match=r"moto-s3 is already running \(pid \d+\)"):
        moto.start()


def test_stop_refuses_connections_on_the_port_and_start_serves_the_same_objects_there_again(
    moto: MotoS3Server,
) -> None:
    moto.create_buckets("models-outage")
    moto.start()
    client = _one_try(moto)
    put = client.put_object(Bucket="models-outage", Key="status/r.json", Body=b"before the outage")
    pid, port = moto.process.pid if moto.process else None, moto.port
    moto.stop()
    assert not moto.running
    assert moto.process is not None
    assert moto.process.running  # the objects are in its memory
    assert _refused(port)
    with pytest.raises(botocore.exceptions.EndpointConnectionError):
        client.get_object(Bucket="models-outage", Key="status/r.json")
    moto.stop()  # stopping a stopped server does nothing
    moto.start()
    assert (moto.running, moto.port, moto.process.pid if moto.process else None) == (True, port, pid)
    got = client.get_object(Bucket="models-outage", Key="status/r.json")
    assert (got["Body"].read(), got["ETag"]) == (b"before the outage", put["ETag"])
    client.put_object(Bucket="models-outage", Key="status/r.json", Body=b"after")  # it takes writes again


def test_stop_cuts_a_connection_that_is_open(moto: MotoS3Server) -> None:
    """A client half-way through sending its request, as when the server dies: the server closes it."""
    moto.start()
    with socket.create_connection((LOOPBACK, moto.port), timeout=5) as conn:
        conn.sendall(b"PUT /models-x/k HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\npartial")
        time.sleep(0.2)  # the server has accepted it and waits for the rest of the body
        moto.stop()
        try:
            answer = conn.recv(4096)
        except ConnectionResetError:
            answer = b""
    assert answer == b""


def test_shutdown_ends_the_process_and_a_later_start_begins_empty_with_the_named_buckets(
    moto: MotoS3Server,
) -> None:
    moto.create_buckets("models-gone")
    moto.start()
    s3_client(moto).put_object(Bucket="models-gone", Key="k", Body=b"x")
    first = moto.process
    moto.shutdown()
    assert first is not None
    assert first.returncode == 0  # SIGTERM: a clean exit
    assert _refused(moto.port)
    moto.start()
    assert moto.process is not first
    assert s3_client(moto).list_objects_v2(Bucket="models-gone").get("KeyCount") == 0


def test_a_stopped_server_exits_with_the_process_that_started_it(tmp_path: Path) -> None:
    script = (
        "import sys; from pathlib import Path; from model_sync.sandbox.s3server import MotoS3Server\n"
        "s = MotoS3Server(Path(sys.argv[1]), Path(sys.argv[1]) / 'log').start(); s.stop(); print(s.process.pid)\n"
    )
    owner = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True,
                           timeout=60, check=True)  # fmt: skip
    pid = int(owner.stdout)

    def gone() -> bool:  # exited: no such process, or a zombie left for init to reap
        stat = Path(f"/proc/{pid}/stat")
        return not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"

    wait_until(gone, 10, what=f"moto-s3 pid {pid} to exit after its owner")


def test_an_object_replaced_while_a_request_holds_it_still_reads_its_bytes() -> None:
    """The launcher's fix to moto (moto_s3.keep_replaced_objects_readable), without timing: an
    overwrite as put_object does it (_VersionedKeyStore.setlist) while the old object is held, in a
    process of its own. moto alone closes the old object's buffer (a racing GET answered 500)."""
    script = (
        "from moto.s3.models import FakeKey\n"
        "from moto.s3.utils import _VersionedKeyStore\n"
        "from model_sync.sandbox import moto_s3\n"
        "def key(value):\n"
        "    return FakeKey('k', value, account_id='123456789012', region_name='us-east-1')\n"
        "def overwrite():\n"
        "    store, old = _VersionedKeyStore(), key(b'old')\n"
        "    store.setlist('k', [old])\n"
        "    store.setlist('k', [key(b'new')])  # what put_object does\n"
        "    try:\n"
        "        return old.value\n"
        "    except ValueError as e:\n"
        "        return str(e)\n"
        "print(overwrite())\n"
        "moto_s3.keep_replaced_objects_readable()\n"
        "print(overwrite())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.splitlines() == ["I/O operation on closed file.", "b'old'"], done.stderr


def test_timestamps_serialize_the_same_without_dateutil() -> None:
    """The launcher's speed-up to moto (moto_s3.serialize_timestamps_without_dateutil) writes every
    timestamp as moto's serializer did, in each format it writes (ISO 8601 in XML bodies, RFC 822 in
    headers, epoch seconds in JSON), for the strings moto keeps and for datetimes; in a process of
    its own, because it changes moto's module."""
    script = (
        "from datetime import datetime, timedelta, timezone\n"
        "from moto.core.serialize import TimestampSerializer\n"
        "from model_sync.sandbox import moto_s3\n"
        "values = ['2026-12-07T14:00:00.123Z', '2026-12-07T14:00:00Z', '2026-12-07T14:00:00.000Z',\n"
        "          '2026-12-07T14:00:00+00:00', '2026-12-07T14:00:00', '2026-12-07T16:00:00.5+02:00',\n"
        "          'Mon, 07 Dec 2026 14:00:00 GMT', '1796652000', datetime(2026, 12, 7, 14, 0, 0, 123000),\n"
        "          datetime(2026, 12, 7, 14, tzinfo=timezone(timedelta(hours=-5))), 1796652000.25]\n"
        "def written():\n"
        "    s = TimestampSerializer('iso8601')\n"
        "    return [s._convert_timestamp_to_str(v, f) for v in values\n"
        "            for f in ('iso8601', 'iso8601_zeroed', 'rfc822', 'unixtimestamp')]\n"
        "before = written()\n"
        "moto_s3.serialize_timestamps_without_dateutil()\n"
        "after = written()\n"
        "print(len(before), before == after, [(b, a) for b, a in zip(before, after) if b != a])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split()[:2] == ["44", "True"], done.stdout + done.stderr


def test_a_get_racing_a_put_of_the_same_key_never_fails_nor_tears(moto: MotoS3Server) -> None:
    moto.create_buckets(BUCKET)
    moto.start()
    result = race(moto.endpoint_url, moto.client_env(), seconds=2.0, readers=2)
    assert result["gets"] > 20, result
    assert result["puts"] > 10, result
    failed = (result["get_errors_by_kind"], result["put_errors_by_kind"], result["torn"])
    assert failed == ({}, {}, 0), f"{failed}; log: {moto.process.log_tail() if moto.process else ''}"
