//! The local endpoint stops without a function process ever panicking: it kills the
//! processes before its runtime API stops answering, so no `/next` poll is answered
//! without an invocation (lambda_runtime panics on that: "missing
//! lambda-runtime-aws-request-id header"). Stopped many times with the real function
//! binary, warm processes polling at the moment of the stop.

use std::time::Duration;

use nums_cloud::dispatch::{Invoke, Invoker};
use nums_cloud::local::{LocalConfig, LocalEndpoint};
use nums_layout::StoreSpec;
use nums_layout::batch::{Batch, Payload};

#[tokio::test(flavor = "multi_thread")]
async fn stopping_an_endpoint_leaves_no_panic_in_the_function_logs() {
    let root = std::env::temp_dir().join(format!("nums-endpoint-stop-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let store = StoreSpec {
        url: url::Url::from_directory_path(root.join("store"))
            .unwrap()
            .to_string(),
        endpoint: None,
    };
    let empty = serde_json::to_vec(&Payload::Inline(Batch {
        store,
        job_prefix: "t".into(),
        arrays: vec![],
        tasks: vec![],
        prefetch_budget: 0,
    }))
    .unwrap();
    let workers = 3;
    let logs = root.join("logs");
    for _ in 0..30 {
        let ep = LocalEndpoint::start(LocalConfig {
            function: "f".into(),
            workers,
            memory_mb: 256,
            timeout: Duration::from_secs(30),
            command: vec![env!("CARGO_BIN_EXE_nums-cloud").into(), "function".into()],
            log_dir: logs.clone(),
            tier_percent: 0,
        })
        .await
        .unwrap();
        let inv = Invoker::local(&ep.invoke_url, "f");
        // Every process warm, then polling again for the next invocation.
        let answers =
            futures::future::join_all((0..2 * workers).map(|_| inv.invoke(empty.clone()))).await;
        for a in answers {
            assert_eq!(a.unwrap().invocations, 1);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        ep.stop().await;
    }
    let mut text = String::new();
    for e in std::fs::read_dir(&logs).unwrap() {
        text += &std::fs::read_to_string(e.unwrap().path()).unwrap();
    }
    assert!(
        !text.contains("panicked"),
        "a function process panicked:\n{text}"
    );
    std::fs::remove_dir_all(&root).ok();
}
