//! The library API (`nums_cloud::api`) used from async code, as a program would: computes
//! awaited under a multi-thread runtime, blocking forms inside runtimes, typed errors
//! matched, a bad definition that does not poison the session, and persist /
//! compute_many / from_ndarray checked against known values. Runs the real engine with
//! the local backend (function processes of the `nums-cloud` binary) on a file store.

use std::path::{Path, PathBuf};

use ndarray::{Array2, ArrayD, array};
use nums_cloud::api::{Array, Session};
use nums_cloud::dispatch::InvokeError;
use nums_cloud::{Block, DType, Error};

/// A store folder of its own for each test, removed at the end.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("nums-api-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    fn session(&self) -> Session {
        Session::new(&format!("file://{}", self.0.join("store").display()))
            .unwrap()
            .function_binary(env!("CARGO_BIN_EXE_nums-cloud"))
    }

    /// Files under the store folder (relative paths), sorted.
    fn stored(&self) -> Vec<String> {
        fn walk(root: &Path, d: &Path, out: &mut Vec<String>) {
            for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(root, &p, out);
                } else {
                    out.push(p.strip_prefix(root).unwrap().display().to_string());
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.0.join("store"), &self.0.join("store"), &mut out);
        out.sort();
        out
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn f64s(b: &Block) -> Vec<f64> {
    b.to_f64().iter().copied().collect()
}

#[test]
fn api_types_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Session>();
    send_sync::<Array>();
    send_sync::<Error>();
}

#[tokio::test(flavor = "multi_thread")]
async fn compute_awaits_in_async_code_and_errors_are_typed() {
    let d = Dir::new("async");
    let s = d.session();
    let x = s
        .arange(12.0)
        .reshape(&[4, 3])
        .block(&[3, 2])
        .named("X")
        .unwrap();
    let w = s.from_ndarray(array![1.0, 2.0, 3.0]).named("w").unwrap();
    let y = x.matmul(&w);
    assert_eq!(
        f64s(&y.compute().await.unwrap()),
        vec![8.0, 26.0, 44.0, 62.0]
    );

    // Shapes that do not broadcast: refused before anything runs, naming the arrays as
    // the program named them, the caret under the operator of the expression it built.
    let bad = &x + &s.ones(&[4]);
    let e = bad.compute().await.unwrap_err();
    let Error::Job { array, message } = &e else {
        panic!("expected a job error, got {e:?}")
    };
    assert_eq!(array.as_deref(), Some("X + ones([4])"));
    assert!(message.starts_with("array `X + ones([4])`: "), "{message}");
    assert!(message.contains("(4, 3) and (4,)"), "{message}");
    assert!(message.contains("X + ones([4])\n      ^"), "{message}");
    assert!(
        !message.contains(".toml") && !message.contains("_"),
        "{message}"
    );

    // The session is not poisoned: arrays defined before and after still compute.
    let after = (&x * 2.0).sum(None);
    assert_eq!(f64s(&after.compute().await.unwrap()), vec![132.0]);
    assert_eq!(f64s(&y.sum(None).compute().await.unwrap()), vec![140.0]);

    // An expression's syntax is checked when it is defined, with the caret in the text
    // the program wrote.
    let e = s.expr("{0} @@ {1}", &[&x, &w]).unwrap_err();
    assert!(matches!(e, Error::Job { .. }), "{e:?}");
    assert!(e.to_string().contains("{0} @@ {1}\n         ^"), "{e}");
    let e = s.expr("{0} + {2}", &[&x, &w]).unwrap_err();
    assert!(e.to_string().contains("{2}"), "{e}");

    // An unknown function is found when the array is computed, and named.
    let unknown = s.expr("sine({0})", &[&x]).unwrap();
    let e = unknown.compute().await.unwrap_err();
    assert!(matches!(e, Error::Job { .. }), "{e:?}");
    assert!(e.to_string().contains("sine"), "{e}");

    // Two computes at once from spawned tasks (the futures are Send).
    let (a, b) = (x.max(None), x.min(None));
    let ta = tokio::spawn(async move { a.compute().await });
    let tb = tokio::spawn(async move { b.compute().await });
    assert_eq!(f64s(&ta.await.unwrap().unwrap()), vec![11.0]);
    assert_eq!(f64s(&tb.await.unwrap().unwrap()), vec![0.0]);

    // Nothing of these computes is left in the store but the input from memory.
    let left = d.stored();
    let arrays: Vec<_> = left.iter().filter(|k| k.ends_with("zarr.json")).collect();
    assert_eq!(arrays.len(), 1, "{left:?}");
    let prefix = arrays[0].trim_end_matches("zarr.json");
    assert!(left.iter().all(|k| k.starts_with(prefix)), "{left:?}");
    s.close().await.unwrap();
    assert!(d.stored().is_empty(), "{:?}", d.stored());
}

#[tokio::test(flavor = "multi_thread")]
async fn blocking_forms_work_inside_a_multi_thread_runtime() {
    let d = Dir::new("blocking-mt");
    let s = d.session();
    let v = s.ones(&[3, 3]).sum(None).compute_blocking().unwrap();
    assert_eq!(f64s(&v), vec![9.0]);
    assert_eq!(s.zeros(&[2, 5]).shape_blocking().unwrap(), vec![2, 5]);
}

#[tokio::test]
async fn blocking_forms_work_inside_a_current_thread_runtime() {
    let d = Dir::new("blocking-ct");
    let s = d.session();
    let v = s.arange(5.0).sum(None).compute_blocking().unwrap();
    assert_eq!(f64s(&v), vec![10.0]);
    // And the async form, awaited on this runtime.
    let v = s.arange(5.0).max(None).compute().await.unwrap();
    assert_eq!(f64s(&v), vec![4.0]);
}

#[tokio::test(flavor = "multi_thread")]
async fn operators_take_every_owned_and_borrowed_pair_and_non_finite_scalars() {
    let d = Dir::new("ops");
    let s = d.session();
    let a = s.from_ndarray(array![1.0, 2.0, 4.0]);
    let b = s.from_ndarray(array![2.0, 2.0, 2.0]);
    let all = [
        &a + &b,
        a.clone() - &b,
        &a * b.clone(),
        a.clone() / b.clone(),
        &a % 3.0,
        a.clone() + 1.0,
        10.0 - &a,
        2.0 * a.clone(),
        -&a,
        -a.clone(),
        a.pow(2.0),
        a.maximum(&b),
        a.minimum(f64::NEG_INFINITY),
        &a * f64::NAN,
        f64::INFINITY + &a,
        s.full(&[3], f64::NAN),
        a.gt(&b),
        a.le(2.0),
        a.equal(2.0),
    ];
    let refs: Vec<&Array> = all.iter().collect();
    let got: Vec<Vec<f64>> = s
        .compute_many(&refs)
        .await
        .unwrap()
        .iter()
        .map(f64s)
        .collect();
    let inf = f64::INFINITY;
    let want = [
        vec![3.0, 4.0, 6.0],
        vec![-1.0, 0.0, 2.0],
        vec![2.0, 4.0, 8.0],
        vec![0.5, 1.0, 2.0],
        vec![1.0, 2.0, 1.0],
        vec![2.0, 3.0, 5.0],
        vec![9.0, 8.0, 6.0],
        vec![2.0, 4.0, 8.0],
        vec![-1.0, -2.0, -4.0],
        vec![-1.0, -2.0, -4.0],
        vec![1.0, 4.0, 16.0],
        vec![2.0, 2.0, 4.0],
        vec![-inf, -inf, -inf],
        vec![f64::NAN; 3],
        vec![inf; 3],
        vec![f64::NAN; 3],
        vec![0.0, 0.0, 1.0],
        vec![1.0, 1.0, 0.0],
        vec![0.0, 1.0, 0.0],
    ];
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let same = g
            .iter()
            .zip(w)
            .all(|(g, w)| g == w || (g.is_nan() && w.is_nan()));
        assert!(same, "{}: got {g:?}, want {w:?}", all[i].label());
    }
    assert_eq!(a.gt(&b).dtype().await.unwrap(), DType::Bool);
}

#[tokio::test(flavor = "multi_thread")]
async fn from_ndarray_is_written_once_and_read_in_place() {
    let d = Dir::new("ndarray");
    let s = d.session().workers(2);
    // 1000 x 200 float64 (1.6 MB): split into row blocks over the 2 workers.
    let m = Array2::from_shape_fn((1000, 200), |(i, j)| ((i * 7 + j * 3) % 11) as f64 - 5.0);
    let ints = array![[1i64, -2], [3, 4]];
    let flags = array![true, false, true];
    let x = s.from_ndarray(&m).named("M").unwrap();
    let col_sums = x.sum(Some(&[0]));
    let got = col_sums.compute().await.unwrap();
    let want: ArrayD<f64> = m.sum_axis(ndarray::Axis(0)).into_dyn();
    assert_eq!(got, Block::F64(want));
    let stored = d.stored();
    let chunks: Vec<_> = stored
        .iter()
        .filter(|k| k.contains("/M/") || k.contains("/_"))
        .collect();
    assert!(
        chunks.iter().any(|k| k.ends_with("c/1/0")),
        "two row blocks: {stored:?}"
    );
    // Read in place by the next compute too: still one copy in the store.
    let gram = x.t().matmul(&x).compute().await.unwrap();
    assert_eq!(gram, Block::F64(m.t().dot(&m).into_dyn()));
    assert_eq!(d.stored(), stored);

    let i = s.from_ndarray(ints.clone());
    assert_eq!(i.dtype().await.unwrap(), DType::Int64);
    let got = (&i * 2.0).compute().await.unwrap(); // int64 * float: float64
    assert_eq!(got, Block::F64(array![[2.0, -4.0], [6.0, 8.0]].into_dyn()));
    let got = s.from_ndarray(flags).sum(None).compute().await.unwrap();
    assert_eq!(got, Block::I64(ndarray::arr0(2).into_dyn()));
    drop((x, i, col_sums));
    drop(s);
    // The last handle gone, what the session stored is gone too.
    assert!(d.stored().is_empty(), "{:?}", d.stored());
}

#[tokio::test(flavor = "multi_thread")]
async fn arrays_of_every_dtype_come_and_go_in_their_dtype() {
    use nums_layout::C64;
    let d = Dir::new("dtypes");
    let s = d.session();
    let z = array![C64::new(1.0, 2.0), C64::new(-0.5, 0.25)];
    let x = s.from_ndarray(&z);
    assert_eq!(x.dtype().await.unwrap(), DType::Complex64);
    // |z|^2 through the conjugate (complex64), and the real and imaginary parts (float32).
    let sq = (&x * &x.conj()).compute().await.unwrap();
    assert_eq!(
        sq,
        Block::C64(array![C64::new(5.0, 0.0), C64::new(0.3125, 0.0)].into_dyn())
    );
    let re = x.real().compute().await.unwrap();
    assert_eq!(re, Block::F32(array![1.0f32, -0.5].into_dyn()));
    assert_eq!(
        x.imag().compute().await.unwrap(),
        Block::F32(array![2.0f32, 0.25].into_dyn())
    );
    // uint8 wraps as NumPy's (250 + 10 is 4), and keeps its dtype.
    let u = s.from_ndarray(array![250u8, 7]);
    let got = s
        .expr("{0} + {0} // 25", &[&u])
        .unwrap()
        .compute()
        .await
        .unwrap();
    assert_eq!(got, Block::U8(array![4u8, 7].into_dyn()));
    let i = s.from_ndarray(array![-128i8, 5]).astype(DType::Int16);
    assert_eq!(
        i.abs().compute().await.unwrap(),
        Block::I16(array![128i16, 5].into_dyn())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn persist_keeps_an_array_that_later_computes_read_in_place() {
    let d = Dir::new("persist");
    let s = d.session();
    // An input file that the persisted array is made from.
    let input = d.0.join("x.npy");
    let xv = Array2::from_shape_fn((50, 4), |(i, j)| (i + 10 * j) as f64);
    ndarray_npy::write_npy(&input, &xv).unwrap();
    let x = s.load(input.to_str().unwrap()).named("X").unwrap();
    let y = (&x * 2.0 + 1.0).named("Y").unwrap();
    s.persist(&y).await.unwrap();
    s.persist(&y).await.unwrap(); // twice: nothing more
    let kept: Vec<_> = d
        .stored()
        .into_iter()
        .filter(|k| k.contains("/Y/"))
        .collect();
    assert!(
        kept.iter().any(|k| k.ends_with("/Y/zarr.json")),
        "{:?}",
        d.stored()
    );
    // The input is gone: a compute that needed X would fail; Y is read in place.
    std::fs::remove_file(&input).unwrap();
    let got = y.sum(Some(&[0])).compute().await.unwrap();
    let want = (&xv * 2.0 + 1.0).sum_axis(ndarray::Axis(0)).into_dyn();
    assert_eq!(got, Block::F64(want));
    let e = x.sum(None).compute().await.unwrap_err();
    let Error::Job { array, message } = &e else {
        panic!("expected a job error, got {e:?}")
    };
    assert_eq!(array.as_deref(), Some("X"));
    assert!(
        message.contains("array `X`: load: ") && message.contains("x.npy"),
        "{message}"
    );

    // A block of the persisted array removed behind the session's back: a data error
    // naming the block, not a wrong answer.
    let chunk = d
        .stored()
        .into_iter()
        .find(|k| k.contains("/Y/c/"))
        .unwrap();
    std::fs::remove_file(d.0.join("store").join(&chunk)).unwrap();
    let e = (&y + 0.0).compute().await.unwrap_err();
    assert!(matches!(e, Error::Data { .. }), "{e:?}");
    assert!(e.to_string().contains("Y/c/"), "{e}");

    s.close().await.unwrap();
    assert!(d.stored().is_empty(), "{:?}", d.stored());
    let e = y.compute().await.unwrap_err();
    assert!(
        matches!(e, Error::Config { ref setting, .. } if setting == "close"),
        "{e:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn compute_many_runs_one_job_for_several_arrays() {
    let d = Dir::new("many");
    let s = d.session();
    let x = s
        .random_normal(&[3000, 6], 11)
        .block(&[1000, 6])
        .named("X")
        .unwrap();
    let mean = x.mean(Some(&[0]));
    let sq = (&x * &x).mean(Some(&[0]));
    let n = x.gt(0.0).sum(None);
    let v = s.compute_many(&[&mean, &sq, &n, &mean]).await.unwrap();
    assert_eq!(v.len(), 4);
    assert_eq!(v[0], v[3]);
    // The same values as computed one by one (the same seed gives the same data).
    assert_eq!(v[0], mean.compute().await.unwrap());
    assert_eq!(v[1], sq.compute().await.unwrap());
    // Normal(0, 1): means near 0, mean squares near 1, about half positive.
    assert!(f64s(&v[0]).iter().all(|m| m.abs() < 0.1), "{:?}", v[0]);
    assert!(
        f64s(&v[1]).iter().all(|m| (m - 1.0).abs() < 0.1),
        "{:?}",
        v[1]
    );
    let Block::I64(n) = &v[2] else {
        panic!("{:?}", v[2])
    };
    assert!((8000..10000).contains(&n.sum()), "{n}");
}

#[tokio::test(flavor = "multi_thread")]
async fn settings_plan_store_and_dispatch_errors_are_typed() {
    let d = Dir::new("errors");
    // A plan that cannot fit memory_mb: the array and the memory it needs.
    let s = d.session().memory_mb(128);
    let big = s
        .zeros(&[40_000_000])
        .block(&[40_000_000])
        .named("Big")
        .unwrap();
    let e = (&big + 1.0).compute().await.unwrap_err();
    let Error::Plan {
        array,
        need_mib,
        memory_mb,
        message,
    } = &e
    else {
        panic!("expected a plan error, got {e:?}")
    };
    assert_eq!(*memory_mb, 128);
    assert!(*need_mib > 128, "{e}");
    assert!(array.is_some(), "{e}");
    assert!(message.contains("memory_mb"), "{message}");
    assert!(!message.contains(".toml"), "{message}");

    // Settings out of range name the setting.
    let e = d
        .session()
        .workers(0)
        .ones(&[2])
        .compute()
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::Config { ref setting, .. } if setting == "workers"),
        "{e:?}"
    );
    let e = d
        .session()
        .timeout_seconds(901)
        .ones(&[2])
        .compute()
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::Config { ref setting, .. } if setting == "timeout_seconds"),
        "{e:?}"
    );

    // A store that does not take writes.
    let s = Session::new("file:///proc/nums-api-test").unwrap();
    let e = s.ones(&[2]).compute().await.unwrap_err();
    assert!(matches!(e, Error::Store { .. }), "{e:?}");

    // Function processes that fail every invocation: a dispatch error, after retries.
    let s = d.session().function_binary("/bin/false");
    let e = s.ones(&[2]).sum(None).compute().await.unwrap_err();
    let Error::Dispatch {
        error, attempts, ..
    } = &e
    else {
        panic!("expected a dispatch error, got {e:?}")
    };
    assert!(matches!(error, InvokeError::Function { .. }), "{error:?}");
    assert!(*attempts >= 1, "{e}");
}

#[test]
fn sessions_do_not_mix() {
    let (a, b) = (Dir::new("mix-a"), Dir::new("mix-b"));
    let (s, t) = (a.session(), b.session());
    let x = s.ones(&[2]);
    let y = t.ones(&[2]);
    let e = (&x + &y).compute_blocking().unwrap_err();
    assert!(matches!(e, Error::Job { .. }), "{e:?}");
    assert!(e.to_string().contains("another session"), "{e}");
    let e = s.expr("{0} + {1}", &[&x, &y]).unwrap_err();
    assert!(e.to_string().contains("another session"), "{e}");
    let e = x.named("_3").unwrap_err();
    assert!(matches!(e, Error::Job { .. }), "{e:?}");
}
