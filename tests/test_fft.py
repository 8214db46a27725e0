"""np.fft against NumPy (rtol 1e-10): 1-D lengths over many blocks (2**16 in blocks of
4,096, 3*5*7*64, a prime), 2-D arrays in ragged blocks (fft2, fftn, rfft/irfft round
trips), every norm, n= padding and truncation, float32 to complex64, the frequencies and
shifts; through the Python package (in this process and on function processes) and a job
file run by the real binary, whose plan for a many-block FFT has no task reading the axis
whole. Lengths with a large prime factor (100,003; 2 x 50,021) over many blocks at the
smallest memory_mb, where the axis was once gathered into one block: Bluestein's
transform over blocks, every norm, and a plan whose tasks read a few blocks each. Axes of
2-D arrays: in blocks of whole lanes where a lane fits a task, the four-step or Bluestein's
across blocks where it does not."""
import json
import subprocess

import numpy as np
import pytest

import nums_cloud
import nums_cloud.numpy as nps
from nums import BIN, assert_close, job_text, run

rng = np.random.default_rng(44)


def close(got, want, rtol=1e-10):
    got = got.get() if hasattr(got, "get") else got
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    scale = float(np.max(np.abs(want))) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


def signal(n, complex_=True):
    x = rng.standard_normal(n)
    return x + 1j * rng.standard_normal(n) if complex_ else x


@pytest.mark.parametrize("n,block", [(2 ** 16, 4096), (3 * 5 * 7 * 64, 1000), (8191, 1000)])
def test_1d_over_many_blocks(session, n, block):
    a = signal(n)
    x = nps.asarray(a).block(block)
    close(nps.fft.fft(x), np.fft.fft(a))
    close(nps.fft.ifft(x), np.fft.ifft(a))
    r = a.real
    xr = nps.asarray(r).block(block)
    close(nps.fft.rfft(xr), np.fft.rfft(r))
    spec = np.fft.rfft(r)
    close(nps.fft.irfft(nps.asarray(spec).block(block), n=n), np.fft.irfft(spec, n=n))


@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
def test_every_norm(session, norm):
    a = signal(6720)
    x = nps.asarray(a).block(700)
    close(nps.fft.fft(x, norm=norm), np.fft.fft(a, norm=norm))
    close(nps.fft.ifft(x, norm=norm), np.fft.ifft(a, norm=norm))
    r = a.real
    close(nps.fft.rfft(nps.asarray(r).block(700), norm=norm), np.fft.rfft(r, norm=norm))
    close(nps.fft.irfft(x[:3361], n=6720, norm=norm), np.fft.irfft(a[:3361], n=6720, norm=norm))
    close(nps.fft.hfft(x[:100], norm=norm), np.fft.hfft(a[:100], norm=norm))
    close(nps.fft.ihfft(nps.asarray(r), norm=norm), np.fft.ihfft(r, norm=norm))


def test_n_pads_and_truncates(session):
    a = signal(5000)
    x = nps.asarray(a).block(512)
    for n in (4096, 6000, 5000, 7, 1):
        close(nps.fft.fft(x, n=n), np.fft.fft(a, n=n))
        close(nps.fft.rfft(nps.asarray(a.real).block(512), n=n), np.fft.rfft(a.real, n=n))
        close(nps.fft.irfft(x, n=n), np.fft.irfft(a, n=n))
    small = nps.asarray(a[:10])
    close(nps.fft.fft(small, n=16), np.fft.fft(a[:10], n=16))
    with pytest.raises(ValueError, match="Invalid number of FFT data points"):
        nps.fft.fft(x, n=0)
    with pytest.raises(ValueError, match="Invalid norm value"):
        nps.fft.fft(x, norm="none")


def test_2d_in_ragged_blocks(session):
    a = rng.standard_normal((60, 42)) + 1j * rng.standard_normal((60, 42))
    x = nps.asarray(a).block(7, 8)
    close(nps.fft.fft2(x), np.fft.fft2(a))
    close(nps.fft.ifft2(x, norm="ortho"), np.fft.ifft2(a, norm="ortho"))
    close(nps.fft.fftn(x), np.fft.fftn(a))
    close(nps.fft.fftn(x, s=(64, 40)), np.fft.fftn(a, s=(64, 40)))
    close(nps.fft.ifftn(x, axes=(0,)), np.fft.ifftn(a, axes=(0,)))
    close(nps.fft.fft(x, axis=0), np.fft.fft(a, axis=0))
    r = a.real
    xr = nps.asarray(r).block(7, 8)
    close(nps.fft.rfft(xr, axis=0), np.fft.rfft(r, axis=0))
    close(nps.fft.rfft2(xr), np.fft.rfft2(r))
    close(nps.fft.rfftn(xr), np.fft.rfftn(r))
    # Round trips: irfft of rfft, irfft2 of rfft2, along blocked axes.
    close(nps.fft.irfft(nps.fft.rfft(xr, axis=0), n=60, axis=0), r)
    close(nps.fft.irfft2(nps.fft.rfft2(xr), s=r.shape), r)
    close(nps.fft.irfftn(nps.fft.rfftn(xr), s=r.shape), r)
    spec = np.fft.rfft2(r)
    close(nps.fft.irfft2(nps.asarray(spec).block(9, 5)), np.fft.irfft2(spec))
    # NumPy 2's -1 in s (the input's length along that axis), and an axis named twice
    # (transformed at its first length again: rfftn pads its half spectrum back).
    for f, v, kw in [("fftn", x, {"s": (50, -1)}), ("ifftn", x, {"s": (-1, 17)}),
                     ("fft2", x, {"s": (-1, -1)}), ("rfftn", xr, {"s": (-1, 30)}),
                     ("irfftn", x, {"s": (64, -1)}), ("irfft2", x, {"s": (-1, 9)}),
                     ("rfftn", xr, {"axes": (0, 0)}), ("rfftn", xr, {"axes": (1, 0, 1)}),
                     ("irfftn", x, {"axes": (1, 1)}), ("fftn", x, {"axes": (0, 0)})]:
        want = getattr(np.fft, f)(a if v is x else r, **kw)
        got = getattr(nps.fft, f)(v, **kw).get()
        assert got.shape == want.shape, (f, kw)
        close(got, want)


def test_float32_gives_complex64_and_ints_complex128(session):
    a = rng.standard_normal(4096).astype(np.float32)
    x = nps.asarray(a).block(256)
    got = nps.fft.fft(x).get()
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, np.fft.fft(a), rtol=1e-4, atol=1e-4 * np.abs(got).max())
    assert nps.fft.rfft(nps.asarray(a)).dtype == np.complex64
    assert nps.fft.irfft(nps.fft.rfft(x)).dtype == np.float32
    i = np.arange(100)
    close(nps.fft.fft(nps.asarray(i).block(10)), np.fft.fft(i))


def test_frequencies_and_shifts(session):
    for n in (1, 8, 9):
        for d in (1.0, 0.1, 3):
            close(nps.fft.fftfreq(n, d), np.fft.fftfreq(n, d), rtol=0)
            close(nps.fft.rfftfreq(n, d=d), np.fft.rfftfreq(n, d=d), rtol=0)
    assert nps.fft.fftfreq(8, dtype="float32").dtype == np.float32
    a = rng.standard_normal((9, 10))
    x = nps.asarray(a).block(4, 3)
    close(nps.fft.fftshift(x), np.fft.fftshift(a), rtol=0)
    close(nps.fft.ifftshift(x), np.fft.ifftshift(a), rtol=0)
    close(nps.fft.fftshift(x, axes=1), np.fft.fftshift(a, axes=1), rtol=0)
    close(nps.fft.ifftshift(nps.fft.fftshift(x, axes=(0,)), axes=(0,)), a, rtol=0)


def test_on_function_processes(tmp_path):
    # Nothing in this process: every task runs in local function processes.
    s = nums_cloud.init(storage=f"file://{tmp_path / 'store'}", workers=2, memory_mb=256,
                        progress=False, in_process_mb=0)
    try:
        a = signal(3 * 5 * 7 * 64)
        x = nps.asarray(a).block(1024)
        close(nps.fft.fft(x), np.fft.fft(a))
        r = rng.standard_normal((30, 24))
        close(nps.fft.irfft2(nps.fft.rfft2(nps.asarray(r).block(7, 5)), s=r.shape), r)
    finally:
        s.close()


def largest_task(job):
    """The most bytes a task of the job's plan reads, and the most it writes: its naive
    plan's batches, one task per invocation."""
    p = subprocess.run([BIN, "plan", "--json", str(job)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    naive = {s["scheduler"]: s for s in json.loads(p.stdout)["schedulers"]}["naive"]
    return (max(b["bytes_in"] for b in naive["batches"]),
            max(b["bytes_out"] for b in naive["batches"]))


def test_job_file_and_its_plan(tmp_path):
    n = 2 ** 16
    a = signal(n, complex_=False)
    np.save(tmp_path / "a.npy", a)
    job = tmp_path / "job.toml"
    job.write_text(job_text(
        {"a": {"load": str(tmp_path / "a.npy"), "block": [4096]},
         "f": "np.fft.fft(a)", "r": "fft.irfft(fft.rfft(a), n=65536)",
         "s": "fft.fftshift(fft.fftfreq(8, d=0.5))"},
        {"f": str(tmp_path / "f.npy"), "r": str(tmp_path / "r.npy"),
         "s": str(tmp_path / "s.npy")},
        name="fft", storage={"url": f"file://{tmp_path / 'store'}"}))
    run(job)
    assert_close(np.load(tmp_path / "f.npy"), np.fft.fft(a))
    assert_close(np.load(tmp_path / "r.npy"), a)
    assert_close(np.load(tmp_path / "s.npy"), np.fft.fftshift(np.fft.fftfreq(8, d=0.5)))
    # No task reads or writes the axis whole (1 MiB of complex128); each about a block's
    # worth (64 KiB).
    largest_in, largest_out = largest_task(job)
    assert largest_in <= 2 * 4096 * 16 and largest_out <= 2 * 4096 * 16, (largest_in, largest_out)


@pytest.fixture
def small(tmp_path):
    """A session at the smallest memory_mb (128), where the engine once gathered a prime
    axis of these lengths into one block."""
    s = nums_cloud.init(storage=f"file://{tmp_path / 'store'}", workers=2, memory_mb=128,
                        progress=False)
    yield s
    s.close()


@pytest.mark.parametrize("n", [100_003, 2 * 50_021])
def test_bluestein_for_large_prime_factors(small, n):
    a = signal(n)
    x = nps.asarray(a).block(8192)
    close(nps.fft.fft(x), np.fft.fft(a))
    close(nps.fft.ifft(x), np.fft.ifft(a))
    close(nps.fft.fft(x, norm="ortho"), np.fft.fft(a, norm="ortho"))
    close(nps.fft.ifft(x, norm="forward"), np.fft.ifft(a, norm="forward"))
    r = a.real
    xr = nps.asarray(r).block(8192)
    close(nps.fft.rfft(xr), np.fft.rfft(r))
    close(nps.fft.rfft(xr, norm="ortho"), np.fft.rfft(r, norm="ortho"))
    # irfft of an odd length (its spectrum's n // 2 + 1 = 50,002 entries over blocks), and
    # round trips.
    spec = np.fft.rfft(r)
    close(nps.fft.irfft(nps.asarray(spec).block(8192), n=n), np.fft.irfft(spec, n=n))
    close(nps.fft.irfft(nps.fft.rfft(xr), n=n), r)
    close(nps.fft.irfft(nps.fft.rfft(xr, norm="ortho"), n=n, norm="ortho"), r)


def test_bluestein_along_an_axis_of_a_2d_array(small):
    # Lanes of 500,009 (a prime) do not fit a task at memory_mb = 128 (480,597 complex128):
    # Bluestein's across blocks, the other axis split.
    a = rng.standard_normal((2, 500_009)) + 1j * rng.standard_normal((2, 500_009))
    x = nps.asarray(a).block(1, 65_536)
    close(nps.fft.fft(x), np.fft.fft(a))
    close(nps.fft.ifft(x, norm="ortho"), np.fft.ifft(a, norm="ortho"))
    # Lanes that fit (65,537 and 40,000): re-blocked into whole lanes, one kernel each.
    b = a[:, :65_537].copy()
    y = nps.asarray(b).block(1, 8192)
    close(nps.fft.fftn(y, norm="ortho"), np.fft.fftn(b, norm="ortho"))
    close(nps.fft.hfft(y[:, :40_000], n=79_999), np.fft.hfft(b[:, :40_000], n=79_999))


def test_four_step_along_each_axis_of_a_2d_array(small):
    # Lanes of 2**19 do not fit a task at memory_mb = 128: the four-step along the axis
    # (its twiddles along axis 0 and along axis 1), the other axis in blocks of its own.
    a = rng.standard_normal((3, 2 ** 19)) + 1j * rng.standard_normal((3, 2 ** 19))
    close(nps.fft.fft(nps.asarray(a).block(2, 2 ** 16)), np.fft.fft(a))
    t = np.ascontiguousarray(a.T)
    close(nps.fft.ifft(nps.asarray(t).block(2 ** 16, 2), axis=0, norm="forward"),
          np.fft.ifft(t, axis=0, norm="forward"))


def test_bluestein_plan_reads_blocks_not_the_axis(tmp_path):
    n = 100_003
    a = signal(n, complex_=False)
    np.save(tmp_path / "a.npy", a)
    job = tmp_path / "job.toml"
    job.write_text(job_text(
        {"a": {"load": str(tmp_path / "a.npy"), "block": [8192]},
         "f": "np.fft.fft(a)", "r": f"fft.irfft(fft.rfft(a, norm='ortho'), n={n}, norm='ortho')"},
        {"f": str(tmp_path / "f.npy"), "r": str(tmp_path / "r.npy")},
        name="bluestein", storage={"url": f"file://{tmp_path / 'store'}"},
        compute={"memory_mb": 128}))
    run(job)
    close(np.load(tmp_path / "f.npy"), np.fft.fft(a))
    close(np.load(tmp_path / "r.npy"), a)
    # No task reads or writes the axis whole (1.6 MB of complex128), each a few blocks of
    # 8,192 (128 KiB) at most.
    largest_in, largest_out = largest_task(job)
    axis = 16 * n
    assert largest_in <= 6 * 16 * 8192 < axis and largest_out <= 3 * 16 * 8192, \
        (largest_in, largest_out)
