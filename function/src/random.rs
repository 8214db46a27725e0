//! Random numbers drawn element by element from (seed, flat index) alone, so that an
//! array's values do not depend on its blocks: each element has its own stream of
//! uniforms (draw `j` of element `i`), which the rejection samplers below take as many
//! of as they need. Exact samplers: Marsaglia and Tsang's gamma; Poisson and binomial by
//! Knuth's recursions through gamma and beta (TAOCP 3.4.1), O(log) draws for any size.

/// A well-mixed 64-bit hash (SplitMix64's finalizer).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The uniforms of one element: draw `j` is in [0, 1).
struct Stream {
    base: u64,
    j: u64,
}

impl Stream {
    fn new(key: u64, i: u64) -> Stream {
        Stream {
            base: mix(key
                ^ mix(i
                    .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                    .wrapping_add(0x2545_f491_4f6c_dd1d))),
            j: 0,
        }
    }

    fn uniform(&mut self) -> f64 {
        self.j += 1;
        let h = mix(self.base ^ self.j.wrapping_mul(0xd1b5_4a32_d192_ed03));
        (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// In (0, 1]: finite logarithms.
    fn open(&mut self) -> f64 {
        1.0 - self.uniform()
    }

    fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.open(), self.uniform());
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Gamma(k, 1) (Marsaglia and Tsang; k < 1 boosted by U^(1/k)).
    fn gamma(&mut self, k: f64) -> f64 {
        if k <= 0.0 {
            return 0.0;
        }
        if k < 1.0 {
            let g = self.gamma(k + 1.0);
            return g * self.open().powf(1.0 / k);
        }
        let d = k - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = 1.0 + c * x;
            if v <= 0.0 {
                continue;
            }
            let v = v * v * v;
            let u = self.open();
            if u < 1.0 - 0.0331 * x.powi(4) || u.ln() < 0.5 * x * x + d * (1.0 - v + v.ln()) {
                return d * v;
            }
        }
    }

    /// Binomial(n, p): Knuth's halving through Beta(a, b) while n is large, then n
    /// Bernoulli trials.
    fn binomial(&mut self, mut n: u64, mut p: f64) -> u64 {
        let mut k = 0;
        while n > 64 {
            if p <= 0.0 {
                return k;
            }
            if p >= 1.0 {
                return k + n;
            }
            let a = 1 + n / 2;
            let b = n + 1 - a;
            let (ga, gb) = (self.gamma(a as f64), self.gamma(b as f64));
            let x = ga / (ga + gb);
            if x >= p {
                n = a - 1;
                p /= x;
            } else {
                k += a;
                n = b - 1;
                p = (p - x) / (1.0 - x);
            }
        }
        k + (0..n).filter(|_| self.uniform() < p).count() as u64
    }

    /// Poisson(lam): Knuth's reduction through Gamma(m) while lam is large, then the
    /// product of uniforms.
    fn poisson(&mut self, mut lam: f64) -> u64 {
        let mut k = 0;
        while lam > 30.0 {
            let m = (lam * 7.0 / 8.0).floor() as u64;
            let x = self.gamma(m as f64);
            if x < lam {
                k += m;
                lam -= x;
            } else {
                return k + self.binomial(m - 1, lam / x);
            }
        }
        let limit = (-lam).exp();
        let mut prod = self.uniform();
        while prod > limit {
            k += 1;
            prod *= self.uniform();
        }
        k
    }
}

/// Element `i` of Gamma(shape, 1) with key `key`.
pub(crate) fn gamma(key: u64, i: u64, shape: f64) -> f64 {
    Stream::new(key, i).gamma(shape)
}

/// Element `i` of Poisson(lam) with key `key`.
pub(crate) fn poisson(key: u64, i: u64, lam: f64) -> i64 {
    Stream::new(key, i).poisson(lam) as i64
}

/// Element `i` of Binomial(n, p) with key `key`.
pub(crate) fn binomial(key: u64, i: u64, n: u64, p: f64) -> i64 {
    Stream::new(key, i).binomial(n, p) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moments(xs: impl Iterator<Item = f64>) -> (f64, f64) {
        let v: Vec<f64> = xs.collect();
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        (m, v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n)
    }

    #[test]
    fn samplers_have_their_distributions_moments() {
        let n = 200_000u64;
        for k in [0.3, 1.0, 2.5, 40.0] {
            let (m, v) = moments((0..n).map(|i| gamma(5, i, k)));
            assert!(
                (m - k).abs() < 0.02 * k.max(1.0) && (v - k).abs() < 0.05 * k.max(1.0),
                "gamma({k}): {m} {v}"
            );
        }
        for lam in [0.5, 7.0, 31.0, 1e4] {
            let (m, v) = moments((0..n).map(|i| poisson(6, i, lam) as f64));
            assert!(
                (m - lam).abs() < 0.02 * lam.max(1.0) && (v - lam).abs() < 0.05 * lam.max(1.0),
                "poisson({lam}): {m} {v}"
            );
        }
        for (t, p) in [(10u64, 0.3), (65, 0.5), (1_000_000, 0.01), (1000, 0.999)] {
            let (m, v) = moments((0..n).map(|i| binomial(7, i, t, p) as f64));
            let (em, ev) = (t as f64 * p, t as f64 * p * (1.0 - p));
            assert!(
                (m - em).abs() < 0.02 * em.max(1.0) && (v - ev).abs() < 0.06 * ev.max(1.0),
                "binomial({t}, {p}): {m} {v}"
            );
        }
    }
}
