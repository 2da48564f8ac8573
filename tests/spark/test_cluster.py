"""The source and sink on a real Spark standalone cluster, not only ``local[*]``: a master and two
workers (1 core, 512 MiB each) started from PySpark's own ``spark-class`` on 127.0.0.1, a driver
submitted with ``spark-submit``; its batch read, filtered read, write and S3 read are compared with
the local answers. Every process is ours and stopped by pid, every wait bounded."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from ._util import T0, build_topic, log_rows

START_TIMEOUT_S = 150.0  # a loaded 2-core machine: JVM start-ups are slow
JOB_TIMEOUT_S = 600.0
FILTER_SQL = f"partition = 1 AND offset >= 40 AND timestamp >= timestamp_millis({T0 + 1_500})"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "SPARK_HOME": str(_spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_MASTER_HOST": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_LOG_DIR": str(tmp / "logs"),
        "SPARK_NO_DAEMONIZE": "1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    })
    return env


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in reversed(procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in reversed(procs):
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(15)


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            state = json.load(r)
    except (OSError, ValueError):
        return 0
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(master URL, env) of a standalone master with two live workers."""
    tmp = tmp_path_factory.mktemp("cluster")
    env = _env(tmp)
    spark_class = str(_spark_home() / "bin" / "spark-class")
    port, ui = _free_port(), _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []
    log = open(tmp / "daemons.log", "wb")  # noqa: SIM115 - closed after the processes stop
    try:
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(ui)], env=env, stdout=log, stderr=subprocess.STDOUT))
        for i in range(2):
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1",
                 "--memory", "768m", "--webui-port", str(_free_port()), "--work-dir", str(tmp / f"work{i}"),
                 master_url], env=env, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + START_TIMEOUT_S
        while _alive_workers(ui) < 2:
            dead = [p.args[1] for p in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                log.flush()
                tail = (tmp / "daemons.log").read_text(errors="replace")[-3000:]
                pytest.fail(f"standalone cluster did not come up (exited: {dead}):\n{tail}")
            time.sleep(0.3)
        yield master_url, env
    finally:
        _stop(procs)
        log.close()


def _decode(rows: list[list]) -> list[tuple]:
    def dec(v):
        return None if v is None else base64.b64decode(v)

    return [(t, p, o, dec(k), dec(v)) for t, p, o, k, v in rows]


def _expected(data_dir: Path, topic: str) -> list[tuple]:
    return [(r[0], r[1], r[2], r[5], r[6]) for r in log_rows(data_dir, topic)]


# ~40 s on a quiet machine; four JVMs on a loaded 2-core one take minutes.
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_batch_filtered_write_and_s3_read_on_a_standalone_cluster(cluster, s3, tmp_path):
    master_url, env = cluster
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    out.mkdir()
    build_topic(data, "events", 3, 30, 10)
    remote = s3.upload(data, f"cluster-{uuid.uuid4().hex[:8]}/kafka")
    result_path = tmp_path / "result.json"
    job = Path(__file__).with_name("cluster_job.py")
    cmd = [str(_spark_home() / "bin" / "spark-submit"), "--master", master_url,
           "--conf", "spark.executor.memory=512m", "--conf", "spark.executor.cores=1",
           "--conf", "spark.cores.max=2", "--conf", f"spark.pyspark.python={sys.executable}",
           str(job), master_url, str(data), str(out), str(result_path), FILTER_SQL, remote,
           json.dumps(s3.options)]
    # Its own process group: the driver JVM starts the Python driver, and both must go if we stop.
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=JOB_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        output = b""
        pytest.fail(f"the cluster job did not finish in {JOB_TIMEOUT_S} s")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(15)
    assert proc.returncode == 0, output.decode(errors="replace")[-4000:]
    result = json.loads(result_path.read_text())
    assert result["master"] == master_url
    assert result["executors"] == 2  # one per worker: the tasks ran on the cluster
    expected = _expected(data, "events")
    assert len(expected) == 300
    assert _decode(result["batch"]) == expected
    filtered = [(r[0], r[1], r[2], r[5], r[6]) for r in log_rows(data, "events", partitions=[1])
                if r[2] >= 40 and r[3] >= T0 + 1_500]
    assert filtered
    assert _decode(result["filtered"]) == filtered
    copied = _expected(out, "copy")
    assert len(copied) == len(expected)
    assert sorted((v, k or b"") for *_, k, v in copied) == sorted((v, k or b"") for *_, k, v in expected)
    assert _decode(result["s3"]) == expected
