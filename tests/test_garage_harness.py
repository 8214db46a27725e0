"""The test S3 server is a real one: it refuses unsigned or wrongly signed requests, keeps
what a signed PUT stores, and the harness stops it and removes its folder. Standard
library only (a minimal AWS SigV4 signer below), so it checks the harness, not a client."""
import hashlib
import hmac
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from garage import Garage


def sigv4_headers(method, url, region, access_key, secret_key, body=b""):
    """Headers that sign one S3 request (AWS Signature Version 4, payload hashed)."""
    u = urllib.parse.urlsplit(url)
    amz_date = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    payload = hashlib.sha256(body).hexdigest()
    headers = {"host": u.netloc, "x-amz-content-sha256": payload, "x-amz-date": amz_date}
    enc = lambda s: urllib.parse.quote(s, safe="-_.~")  # noqa: E731
    query = "&".join(sorted(f"{enc(k)}={enc(v)}" for k, v in urllib.parse.parse_qsl(u.query, keep_blank_values=True)))
    signed = ";".join(sorted(headers))
    canonical = "\n".join([method, urllib.parse.quote(u.path or "/", safe="/-_.~"), query,
                           *(f"{k}:{headers[k]}" for k in sorted(headers)), "", signed, payload])
    scope = f"{amz_date[:8]}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + secret_key).encode()
    for part in (amz_date[:8], region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
                                f"SignedHeaders={signed}, Signature={signature}")
    return headers


def s3(garage, method, path, body=b"", secret_key=None):
    url = f"{garage.endpoint}{path}"
    headers = sigv4_headers(method, url, garage.region, garage.access_key, secret_key or garage.secret_key, body)
    req = urllib.request.Request(url, data=body if method == "PUT" else None, method=method, headers=headers)
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status, r.read()


def test_garage_refuses_anonymous_requests(garage):
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{garage.endpoint}/{garage.bucket}?list-type=2", timeout=10)
    assert e.value.code == 403


def test_garage_refuses_a_wrong_signature(garage):
    with pytest.raises(urllib.error.HTTPError) as e:
        s3(garage, "GET", f"/{garage.bucket}?list-type=2", secret_key="0" * 64)
    assert e.value.code == 403


def test_signed_put_then_get_round_trips(garage):
    data = os.urandom(1 << 20) + b"nums"
    assert s3(garage, "PUT", f"/{garage.bucket}/harness/blob.bin", data)[0] == 200
    status, got = s3(garage, "GET", f"/{garage.bucket}/harness/blob.bin")
    assert status == 200 and got == data
    status, listing = s3(garage, "GET", f"/{garage.bucket}?list-type=2&prefix=harness/")
    assert b"<Key>harness/blob.bin</Key>" in listing


def test_create_bucket_gives_the_test_key_access(garage):
    garage.create_bucket("nums-harness-extra")
    assert s3(garage, "PUT", "/nums-harness-extra/x", b"x")[0] == 200
    assert s3(garage, "GET", "/nums-harness-extra/x") == (200, b"x")


def test_stop_ends_the_server_and_removes_its_folder():
    with Garage(bucket="nums-stop") as g:
        pid, folder, port = g.proc.pid, g.dir, int(g.endpoint.rsplit(":", 1)[1])
        assert folder.is_dir()
    assert not folder.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
