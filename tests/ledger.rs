//! The load ledger on a real Postgres: loads through `stampede_load(id)` are recorded with
//! the server's clock and herds are found from them.

use crate::common;

use std::time::Duration;

use common::{pg as connect, postgres};
use stampede::ledger;

#[tokio::test(flavor = "multi_thread")]
async fn loads_through_the_function_are_recorded_and_herds_found() {
    let pg = postgres(false).await;
    let url = pg.url();
    let admin = connect(&url).await;
    admin
        .batch_execute(
            "CREATE SCHEMA s; CREATE TABLE s.items (id bigint PRIMARY KEY, version bigint NOT NULL, payload text NOT NULL);
             INSERT INTO s.items SELECT g, 1, 'item ' || g FROM generate_series(1, 10) g;",
        )
        .await
        .expect("seed");
    ledger::install(&admin, "s", Duration::from_millis(200), false)
        .await
        .expect("install");
    let from = ledger::server_now_us(&admin).await.expect("clock");

    // Three loads of key 3 at once (a herd of 3), one of key 4 beside them, then key 3 again
    // alone once the herd is over.
    let mut tasks = Vec::new();
    for key in [3i64, 3, 3, 4] {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let c = connect(&url).await;
            let row = c
                .query_one("SELECT * FROM s.stampede_load($1)", &[&key])
                .await
                .expect("load");
            (
                row.get::<_, i64>(0),
                row.get::<_, String>(1),
                row.get::<_, i64>(2),
            )
        }));
    }
    for (t, key) in tasks.into_iter().zip([3i64, 3, 3, 4]) {
        let (id, payload, version) = t.await.expect("task");
        assert_eq!((id, version), (key, 1));
        assert_eq!(payload, format!("item {key}"));
    }
    admin
        .query_one("SELECT * FROM s.stampede_load(3)", &[])
        .await
        .expect("lone load");
    let to = ledger::server_now_us(&admin).await.expect("clock");

    let loads = ledger::read(&admin, "s", from, to).await.expect("read");
    assert_eq!(loads.len(), 5, "{loads:?}");
    for l in &loads {
        let took = l.end_us - l.start_us;
        assert!(took >= 190_000, "a load costs the 200 ms sleep: {l:?}");
    }
    let h = ledger::herds(&loads);
    assert_eq!(h.loads, 5);
    assert_eq!(h.keys, 2);
    assert_eq!(h.peak_herd, 3, "{loads:?}");
    assert_eq!(h.redundant, 2, "{loads:?}");
    // A window that ends before the loads holds none of them.
    assert!(
        ledger::read(&admin, "s", from - 1_000_000, from)
            .await
            .expect("read")
            .is_empty()
    );
}
