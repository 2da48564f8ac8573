"""An S3-compatible server on 127.0.0.1 for tests and benchmarks: moto's standalone server, started
as a subprocess on a free port and stopped by pid; plus an upload of a local directory, verbatim."""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

ACCESS_KEY = "kafkalog-test"
SECRET_KEY = "kafkalog-test-secret"
REGION = "us-east-1"
_START_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 10.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MotoServer:
    """``with MotoServer() as s3:`` — ``s3.endpoint``, ``s3.options`` (the kafkalog source options),
    ``s3.filesystem()`` (a pyarrow S3FileSystem) and ``s3.upload(local_dir, "bucket/prefix")``."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> MotoServer:
        script = Path(sys.executable).with_name("moto_server")
        cmd = [str(script)] if script.exists() else [sys.executable, "-m", "moto.server"]
        self.process = subprocess.Popen([*cmd, "-H", "127.0.0.1", "-p", str(self.port)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self.process.returncode} at start")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/")
                conn.getresponse().read()
                conn.close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto_server did not answer on port {self.port} within "
                                       f"{_START_TIMEOUT_S} s") from None
                time.sleep(0.1)

    def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(_STOP_TIMEOUT_S)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def options(self) -> dict[str, str]:
        """The kafkalog source options that reach this server."""
        return {"s3.endpoint": self.endpoint, "s3.region": REGION, "s3.accessKey": ACCESS_KEY,
                "s3.secretKey": SECRET_KEY}

    def filesystem(self):
        from pyarrow.fs import S3FileSystem

        return S3FileSystem(access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION,
                            endpoint_override=f"127.0.0.1:{self.port}", scheme="http",
                            allow_bucket_creation=True)

    def upload(self, local_dir: Path, dest: str) -> str:
        """Copy ``local_dir`` to ``bucket/prefix`` byte for byte (creating the bucket); returns the
        ``s3://`` URI of the copy."""
        from pyarrow.fs import LocalFileSystem, copy_files

        fs = self.filesystem()
        bucket = dest.split("/", 1)[0]
        fs.create_dir(bucket)
        copy_files(str(local_dir), dest, source_filesystem=LocalFileSystem(), destination_filesystem=fs)
        return f"s3://{dest}"
