"""The test S3 server is a real one: it refuses unsigned requests."""
import urllib.error
import urllib.request

import pytest


def test_garage_refuses_anonymous_requests(garage):
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{garage.endpoint}/{garage.bucket}?list-type=2", timeout=10)
    assert e.value.code == 403
