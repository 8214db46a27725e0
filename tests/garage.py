"""A real S3 server for tests and benchmarks: one single-node Garage on 127.0.0.1, in a
temporary folder, with a fixed test key and a bucket. Stopped (and its folder removed) on
exit. `python tests/garage.py` runs one until Ctrl-C/SIGTERM and prints `export` lines."""
import ctypes
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

CACHE = Path(os.environ.get("NUMS_CACHE", Path.home() / ".cache" / "nums-cloud"))
DEFAULT_BIN = CACHE / "garage-2.5.0" / "bin" / "garage"
ACCESS_KEY = "GK" + "6e756d732d636c6f75642d74"  # fixed test credentials, local only
SECRET_KEY = "6e756d732d636c6f75642d746573742d7365637265742d6b65792d3030303030"
KEY_NAME = "nums-test"
START_TIMEOUT = 60  # seconds until the server must answer
STOP_TIMEOUT = 10  # Garage waits up to 10 s for open S3 connections after SIGTERM

# Linux: the server gets SIGTERM if the process (thread) that started it dies, e.g. a
# pytest killed with SIGKILL, so no server outlives its test run. libc is loaded here,
# not in the forked child.
_LIBC = ctypes.CDLL(None) if sys.platform.startswith("linux") else None


def _die_with_parent():
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def free_ports(n):
    """n distinct free ports on 127.0.0.1 (all held open together so they differ)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _answers_as_garage(url, marker):
    """Whether url gives an HTTP answer from Garage, not from another process on the port:
    its body holds marker (the S3 API's 403 names Garage; the admin /health text, 200 or
    503 before the layout is applied, points to /v2/GetClusterHealth)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return marker in r.read(4096)
    except urllib.error.HTTPError as e:
        return marker in e.read(4096)
    except OSError:
        return False


class Garage:
    def __init__(self, binary=None, bucket="nums-test"):
        self.binary = str(binary or os.environ.get("NUMS_GARAGE_BIN", DEFAULT_BIN))
        if not Path(self.binary).is_file():
            raise FileNotFoundError(f"garage not found at {self.binary}: run scripts/setup.sh")
        self.bucket = bucket
        self.region = "garage"
        self.access_key, self.secret_key = ACCESS_KEY, SECRET_KEY
        self.dir = Path(tempfile.mkdtemp(prefix="nums-garage-"))
        self.config = self.dir / "garage.toml"
        self.log_path = self.dir / "garage.log"
        self.proc = None
        self.log = None

    def _cli(self, *args, timeout=30):
        try:
            p = subprocess.run([self.binary, "-c", str(self.config), *args], capture_output=True, text=True,
                               timeout=timeout, env=self._proc_env())
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"garage {' '.join(args)} timed out after {timeout:.0f} s") from None
        if p.returncode != 0:
            raise RuntimeError(f"garage {' '.join(args)} failed: {p.stderr.strip()}")
        return p.stdout

    @staticmethod
    def _proc_env():
        return {**os.environ, "NO_COLOR": "1"}  # plain log lines, no ANSI colours

    def log_tail(self, chars=3000):
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return re.sub(r"\x1b\[[0-9;]*m", "", text)[-chars:]

    def _write_config(self):
        rpc, s3, admin = free_ports(3)
        self.endpoint = f"http://127.0.0.1:{s3}"
        self.admin_endpoint = f"http://127.0.0.1:{admin}"
        self.admin_token = secrets.token_hex(16)
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
admin_token = "{self.admin_token}"
""")
        os.chmod(self.config, 0o600)  # it holds the RPC secret and admin token: owner only

    def start(self):
        try:
            for _ in range(3):
                self._write_config()
                self.log = open(self.log_path, "w")
                self.proc = subprocess.Popen([self.binary, "-c", str(self.config), "server"],
                                             stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                             env=self._proc_env(), start_new_session=True,
                                             preexec_fn=_die_with_parent)
                node = self._wait_ready()
                if node is not None:
                    break
                # A port taken between free_ports() and the server's bind: start again on
                # new ports in a fresh folder.
                self._end_process()
                self.log.close()
                for sub in ("meta", "data"):
                    shutil.rmtree(self.dir / sub, ignore_errors=True)
            else:
                raise RuntimeError(f"garage could not bind its ports 3 times:\n{self.log_tail()}")
            self._cli("layout", "assign", "-z", "dc1", "-c", "1G", node)
            self._cli("layout", "apply", "--version", "1")
            self._cli("key", "import", "--yes", "-n", KEY_NAME, self.access_key, self.secret_key)
            self.create_bucket(self.bucket)
        except BaseException:
            self.stop()
            raise
        return self

    def _bind_failure(self):
        """Whether the server failed to bind a port (True), some other API error (raises), or neither.
        Garage panics and exits if the RPC port is taken, but if the S3 port is taken it
        only logs `S3 API server exited with error: ... Address already in use` and keeps
        running (an admin-port error is logged only at shutdown), so a working
        `garage status` does not prove the S3 API is up: _wait_ready also probes both."""
        tail = self.log_tail(100_000)
        m = re.search(r"API server exited with error: (.*)", tail)
        if m and "Address already in use" not in m.group(1):
            raise RuntimeError(f"garage API server failed: {m.group(0)}\n{tail[-3000:]}")
        return bool(m) or "AddrInUse" in tail

    def _wait_ready(self):
        """The node id once RPC, the S3 API and the admin API answer; None if a port was
        taken (the caller retries on new ports)."""
        deadline = time.monotonic() + START_TIMEOUT
        node = rpc_up = None
        while True:
            if self._bind_failure():
                return None
            if self.proc.poll() is not None:
                raise RuntimeError(f"garage server exited with code {self.proc.returncode}:\n{self.log_tail()}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"garage did not answer within {START_TIMEOUT} s:\n{self.log_tail()}")
            if node is None:
                try:
                    self._cli("status", timeout=min(left, 10))  # answers once the RPC server is up
                    node = self._cli("node", "id", "-q").strip().split("@")[0]
                    rpc_up = time.monotonic()
                    continue
                except RuntimeError:
                    pass
            # Garage binds its HTTP ports before RPC, so both answer soon after RPC does.
            # The admin port's bind error is logged only at shutdown, so an API port that
            # does not answer as Garage is taken by another process.
            elif (_answers_as_garage(self.endpoint + "/", b"Garage")
                  and _answers_as_garage(self.admin_endpoint + "/health", b"GetClusterHealth")):
                return node
            elif time.monotonic() - rpc_up > 10:
                return None
            time.sleep(0.2)

    def outage(self, seconds):
        """Stops the server, waits `seconds`, and starts it again on the same ports and data
        (a store outage as clients see it)."""
        self._end_process()
        self.log.close()
        time.sleep(seconds)
        self.log = open(self.log_path, "a")
        self.proc = subprocess.Popen([self.binary, "-c", str(self.config), "server"],
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=self._proc_env(), start_new_session=True,
                                     preexec_fn=_die_with_parent)
        if self._wait_ready() is None:
            raise RuntimeError(f"garage did not come back on its ports:\n{self.log_tail()}")

    def create_bucket(self, name):
        self._cli("bucket", "create", name)
        self._cli("bucket", "allow", "--read", "--write", "--owner", name, "--key", KEY_NAME)

    def env(self):
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def _end_process(self):
        """SIGTERM, then SIGKILL after STOP_TIMEOUT. A second Ctrl-C while waiting kills at once."""
        proc, self.proc = self.proc, None
        try:
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()

    def stop(self):
        """Stop the server and remove its folder. Safe to call twice."""
        try:
            self._end_process()
        finally:
            if self.log is not None:
                self.log.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # before start: a stop while starting cleans up too
    with Garage() as g:
        print(f"export NUMS_S3_ENDPOINT={g.endpoint} NUMS_S3_BUCKET={g.bucket}")
        for k, v in g.env().items():
            print(f"export {k}={v}")
        sys.stdout.flush()
        try:
            while g.proc.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
        else:
            print(f"garage exited by itself (code {g.proc.returncode}):\n{g.log_tail()}", file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
