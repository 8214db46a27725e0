"""A real S3 server for tests and benchmarks: one single-node Garage on 127.0.0.1, in a
temporary folder, with a fixed test key and a bucket. Stopped (and its folder removed) on
exit. `python tests/garage.py` runs one until Ctrl-C and prints `export` lines."""
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CACHE = Path(os.environ.get("NUMS_CACHE", Path.home() / ".cache" / "nums-cloud"))
DEFAULT_BIN = CACHE / "garage-2.5.0" / "bin" / "garage"
ACCESS_KEY = "GK" + "6e756d732d636c6f75642d74"  # fixed test credentials, local only
SECRET_KEY = "6e756d732d636c6f75642d746573742d7365637265742d6b65792d3030303030"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Garage:
    def __init__(self, binary=None, bucket="nums-test"):
        self.binary = str(binary or os.environ.get("NUMS_GARAGE_BIN", DEFAULT_BIN))
        if not Path(self.binary).exists():
            raise RuntimeError(f"garage not found at {self.binary}: run scripts/setup.sh")
        self.bucket = bucket
        self.region = "garage"
        self.access_key, self.secret_key = ACCESS_KEY, SECRET_KEY
        self.dir = Path(tempfile.mkdtemp(prefix="nums-garage-"))
        self.proc = None

    def _cli(self, *args):
        p = subprocess.run([self.binary, "-c", str(self.config), *args], capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            raise RuntimeError(f"garage {' '.join(args)} failed: {p.stderr.strip()}")
        return p.stdout

    def start(self):
        s3, rpc, admin = free_port(), free_port(), free_port()
        self.endpoint = f"http://127.0.0.1:{s3}"
        self.config = self.dir / "garage.toml"
        self.config.write_text(f"""metadata_dir = "{self.dir}/meta"
data_dir = "{self.dir}/data"
db_engine = "sqlite"
replication_factor = 1
rpc_bind_addr = "127.0.0.1:{rpc}"
rpc_public_addr = "127.0.0.1:{rpc}"
rpc_secret = "{secrets.token_hex(32)}"

[s3_api]
s3_region = "{self.region}"
api_bind_addr = "127.0.0.1:{s3}"
root_domain = ".s3.garage.localhost"

[admin]
api_bind_addr = "127.0.0.1:{admin}"
admin_token = "{secrets.token_hex(16)}"
""")
        os.chmod(self.config, 0o600)
        self.log = open(self.dir / "garage.log", "w")
        self.proc = subprocess.Popen([self.binary, "-c", str(self.config), "server"], stdout=self.log, stderr=subprocess.STDOUT)
        try:
            self._configure()
        except BaseException:
            self.stop()
            raise
        return self

    def _configure(self):
        deadline = time.time() + 60
        while True:
            try:
                self._cli("status")  # answers only once the RPC server is up
                node = self._cli("node", "id", "-q").strip().split("@")[0]
                break
            except RuntimeError:
                if self.proc.poll() is not None or time.time() > deadline:
                    tail = (self.dir / "garage.log").read_text()[-2000:]
                    raise RuntimeError(f"garage did not start:\n{tail}")
                time.sleep(0.2)
        self._cli("layout", "assign", "-z", "dc1", "-c", "1G", node)
        self._cli("layout", "apply", "--version", "1")
        self._cli("key", "import", "--yes", "-n", "nums-test", self.access_key, self.secret_key)
        self.create_bucket(self.bucket)

    def create_bucket(self, name):
        self._cli("bucket", "create", name)
        self._cli("bucket", "allow", "--read", "--write", "--owner", name, "--key", "nums-test")

    def env(self):
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


if __name__ == "__main__":
    with Garage() as g:
        print(f"export NUMS_S3_ENDPOINT={g.endpoint} NUMS_S3_BUCKET={g.bucket}")
        for k, v in g.env().items():
            print(f"export {k}={v}")
        sys.stdout.flush()
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            while g.proc.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
