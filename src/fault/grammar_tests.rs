use super::*;
use crate::fault::{DropOrder, SlotChoice};
use crate::values::{Dur, Percent};

fn dur(s: &str) -> Dur {
    s.parse().unwrap()
}

/// The fault a `[[fault]]` table in a scenario file reads as.
fn table(toml_text: &str) -> FaultSpec {
    #[derive(serde::Deserialize)]
    struct File {
        fault: Vec<FaultSpec>,
    }
    let f: File = toml::from_str(&format!("[[fault]]\n{toml_text}")).unwrap();
    f.fault[0]
}

#[test]
fn every_kind_reads_as_its_table() {
    for (flag, file) in [
        (
            "kill-redis@3s+2s",
            "kind = \"kill-redis\"\nat = \"3s\"\ndown_for = \"2s\"",
        ),
        (
            "kill-postgres@1s+4s",
            "kind = \"kill-postgres\"\nat = \"1s\"\ndown_for = \"4s\"",
        ),
        (
            "pause-redis@2s+500ms",
            "kind = \"pause-redis\"\nat = \"2s\"\nfor = \"500ms\"",
        ),
        ("drop-cache@4s", "kind = \"drop-cache\"\nat = \"4s\""),
        (
            "drop-cache@4s,fraction=100%,order=hottest",
            "kind = \"drop-cache\"\nat = \"4s\"\nfraction = \"100%\"\norder = \"hottest\"",
        ),
        (
            "drop-cache@4s,order=random,fraction=0.25",
            "kind = \"drop-cache\"\nat = \"4s\"\nfraction = 0.25\norder = \"random\"",
        ),
        (
            "slow-db@5s+3s,factor=4",
            "kind = \"slow-db\"\nat = \"5s\"\nfor = \"3s\"\nfactor = 4",
        ),
        (
            "spike@5s+2s,factor=3",
            "kind = \"spike\"\nat = \"5s\"\ndown_for = \"2s\"\nfactor = 3.0",
        ),
        (
            "spike@5s+2s,factor=0.5",
            "kind = \"spike\"\nat = \"5s\"\ndown_for = \"2s\"\nfactor = 0.5",
        ),
        ("failover@1s", "kind = \"failover\"\nat = \"1s\""),
        (
            "migrate-slot@2s,slot=hottest",
            "kind = \"migrate-slot\"\nat = \"2s\"\nslot = \"hottest\"",
        ),
        (
            "migrate-slot@2s,slot=866",
            "kind = \"migrate-slot\"\nat = \"2s\"\nslot = 866",
        ),
        ("migrate-slot@2s", "kind = \"migrate-slot\"\nat = \"2s\""),
        ("holder-crash@2s", "kind = \"holder-crash\"\nat = \"2s\""),
        (
            "holder-crash@2s+1s",
            "kind = \"holder-crash\"\nat = \"2s\"\ndown_for = \"1s\"",
        ),
    ] {
        assert_eq!(parse(flag), Ok(table(file)), "{flag}");
    }
    // Every kind is reachable by its name.
    for kind in FaultKind::ALL {
        let text = if kind.is_instant() {
            format!("{kind}@1s")
        } else {
            format!("{kind}@1s+1s")
        };
        assert_eq!(parse(&text).unwrap().kind, kind, "{text}");
    }
}

#[test]
fn every_key_lands_in_its_field() {
    let f = parse("drop-cache@4s,fraction=30%,order=random").unwrap();
    assert_eq!(f.at, dur("4s"));
    assert_eq!(f.fraction, Some(Percent(0.3)));
    assert_eq!(f.order, Some(DropOrder::Random));
    assert_eq!(parse("slow-db@5s+3s,factor=4").unwrap().factor, Some(4.0));
    assert_eq!(parse("spike@5s+2s,factor=1.5").unwrap().factor, Some(1.5));
    let f = parse("migrate-slot@2s,slot=12").unwrap();
    assert_eq!(f.slot, Some(SlotChoice::Number(12)));
    let f = parse(" kill-redis @ 1m30s + 2s ").unwrap();
    assert_eq!((f.at, f.down_for), (dur("90s"), dur("2s")));
}

#[test]
fn spelling_reads_back_as_the_same_fault() {
    for text in [
        "kill-redis@3s+2s",
        "drop-cache@4s,fraction=50%,order=hottest",
        "slow-db@5s+3s,factor=4",
        "spike@5s+2s,factor=0.5",
        "migrate-slot@2s,slot=hottest",
        "migrate-slot@2s,slot=7",
        "pause-redis@1s 500ms+250ms",
    ] {
        let f = parse(text).unwrap();
        assert_eq!(parse(&spell(&f)), Ok(f), "{text} spelled {}", spell(&f));
    }
    assert_eq!(
        spell(&parse("drop-cache@4s,order=random,fraction=0.5").unwrap()),
        "drop-cache@4s,fraction=50%,order=random"
    );
}

#[test]
fn errors_name_the_bad_part_and_what_is_allowed() {
    for (text, words) in [
        ("kill-redis", &["no @AT", "KIND@AT"][..]),
        (
            "kil-redis@1s+1s",
            &[
                "`kil-redis` is not a fault kind",
                "kill-redis, kill-postgres",
            ][..],
        ),
        (
            "kill-redis@1s",
            &["needs +FOR", "how long Redis stays down"][..],
        ),
        (
            "drop-cache@1s+1s",
            &["takes no +FOR", "a drop is instant"][..],
        ),
        ("kill-redis@+1s", &["no time after @"][..]),
        (
            "drop-cache@1s,factr=3",
            &[
                "`factr` is not a key of drop-cache",
                "fraction (",
                "order (",
            ][..],
        ),
        (
            "kill-redis@1s+1s,fraction=10%",
            &["not a key of kill-redis", "takes no keys"][..],
        ),
        (
            "slow-db@1s+1s,fraction=10%",
            &["the keys of slow-db: factor"][..],
        ),
        (
            "drop-cache@1s,fraction",
            &["`fraction` is not KEY=VALUE"][..],
        ),
        ("drop-cache@1s,at=2s", &["`at=` is written in the head"][..]),
        (
            "slow-db@1s+1s,for=2s",
            &["`for=` is written in the head"][..],
        ),
        (
            "drop-cache@1s,fraction=10%,fraction=20%",
            &["`fraction` is given twice"][..],
        ),
        (
            "drop-cache@1s,fraction=200%",
            &["200%", "between 0% and 100%"][..],
        ),
        (
            "drop-cache@1s,order=coldest",
            &["coldest", "hottest", "random"][..],
        ),
        ("slow-db@1s+1s,factor=lots", &["lots"][..]),
        (
            "kill-redis@3+2s",
            &["'3' is not a duration", "with a unit"][..],
        ),
        ("migrate-slot@1s,slot=99999", &["0 to 16383"][..]),
    ] {
        let e = parse(text).unwrap_err();
        for w in words {
            assert!(e.contains(w), "{text}: {e:?} lacks {w:?}");
        }
    }
}

#[test]
fn a_key_is_set_as_the_grammar_reads_it() {
    let f = parse("drop-cache@4s").unwrap();
    assert_eq!(
        with_key(&f, "fraction", "10%").unwrap().fraction,
        Some(Percent(0.1))
    );
    assert_eq!(with_key(&f, "at", "2s").unwrap().at, dur("2s"));
    let e = with_key(&f, "factor", "2").unwrap_err();
    assert!(e.contains("not a key of drop-cache"), "{e}");
    let s = parse("spike@5s+2s").unwrap();
    assert_eq!(with_key(&s, "for", "1s").unwrap().down_for, dur("1s"));
    assert_eq!(with_key(&s, "factor", "3").unwrap().factor, Some(3.0));
}

#[test]
fn network_faults_read_as_their_tables_and_instance_repeats() {
    let f = parse("partition@3s+4s,server=redis,instance=0,instance=2").unwrap();
    assert_eq!(
        f,
        table(
            "kind = \"partition\"\nat = \"3s\"\ndown_for = \"4s\"\nserver = \"redis\"\ninstance = [0, 2]"
        )
    );
    assert_eq!(f.instance.unwrap().iter().collect::<Vec<_>>(), [0, 2]);
    // Written back as the key repeated, and read again the same.
    let spelt = spell(&f);
    assert_eq!(spelt, "partition@3s+4s,instance=0,instance=2,server=redis");
    assert_eq!(parse(&spelt).unwrap(), f);
    assert_eq!(
        parse("reset@1s+1s,instance=1")
            .unwrap()
            .instance
            .unwrap()
            .max(),
        Some(1)
    );
    let l = parse("latency@1s+2s,add=5ms,server=postgres").unwrap();
    assert_eq!(l.add, Some(dur("5ms")));
    l.check("l").unwrap();
    let e = parse("latency@1s+2s").unwrap().check("l").unwrap_err();
    assert!(e.to_string().contains("add=D"), "{e}");
    let b = parse("bandwidth@1s+2s,rate=1mb").unwrap();
    assert_eq!(b.rate.map(|r| r.0), Some(1 << 20));
    let c = parse("slow-close@1s+2s,delay=3s,instance=1").unwrap();
    assert_eq!(c.delay, Some(dur("3s")));
    c.check("c").unwrap();
    let e = parse("slow-close@1s+2s").unwrap().check("c").unwrap_err();
    assert!(e.to_string().contains("delay="), "{e}");
    let e = parse("bandwidth@1s+2s").unwrap().check("b").unwrap_err();
    assert!(e.to_string().contains("rate="), "{e}");
    let e = parse("partition@1s").unwrap_err();
    assert!(e.contains("needs +FOR"), "{e}");
    let e = parse("partition@1s+1s,server=memcached").unwrap_err();
    assert!(e.contains("memcached"), "{e}");
    let e = parse("partition@1s+1s,server=redis,server=postgres").unwrap_err();
    assert!(e.contains("given twice"), "{e}");
    let e = parse("spike@1s+1s,instance=0").unwrap_err();
    assert!(e.contains("not a key of spike"), "{e}");
}
