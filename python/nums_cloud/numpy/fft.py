"""``nums_cloud.numpy.fft``: NumPy's ``np.fft`` (the Array API's FFT extension) over
nums-cloud arrays. An axis in several blocks is transformed by the four-step FFT across
blocks (Bluestein's over them for a prime length; docs/guide.md, "FFT"), never gathered
into one block. Lazy: each returns an array that computes on demand."""

from ._table import _FFT

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2",
           "irfft2", "fftn", "ifftn", "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift",
           "ifftshift"]

# The engine's functions (its table's "fft" family), NumPy's signatures and docstrings.
globals().update({name: _FFT[name] for name in __all__})
