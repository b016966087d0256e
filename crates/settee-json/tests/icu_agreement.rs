//! String collation agrees with an independent ICU: Node.js's `Intl.Collator` (root locale,
//! default strength) sorting a generated sample of mixed-script strings.

use std::cmp::Ordering;
use std::process::Command;

use settee_json::viewkey;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};

/// Characters from several scripts, with case, accents, digits, spaces and punctuation.
const ALPHABET: &[char] = &[
    'a', 'A', 'b', 'B', 'z', 'Z', 'é', 'É', 'è', 'ê', 'ë', 'e', 'E', 'ß', 'ø', 'å', 'æ', 'ñ', 'ç',
    'ü', 'ö', 'α', 'Α', 'β', 'ω', 'Ω', 'д', 'Д', 'ж', 'я', 'ا', 'ب', 'ع', 'ש', 'א', '中', '文',
    '日', '本', 'あ', 'ア', 'か', '한', '글', '0', '1', '9', '٣', ' ', '-', '_', '.', ',', '!',
    '\'', '@', '~',
];

fn sample() -> Vec<String> {
    let mut runner = TestRunner::new(Config {
        rng_seed: proptest::test_runner::RngSeed::Fixed(7),
        ..Config::default()
    });
    let word = prop::collection::vec(prop::sample::select(ALPHABET), 0..8)
        .prop_map(|cs| cs.into_iter().collect::<String>());
    (0..400)
        .map(|_| word.new_tree(&mut runner).expect("a value").current())
        .collect()
}

#[test]
fn string_order_matches_node_intl_collator() {
    let words = sample();
    let script = "const w = JSON.parse(require('fs').readFileSync(0, 'utf8')); const c = new Intl.Collator('und'); w.sort(c.compare); process.stdout.write(JSON.stringify(w.map((x, i) => [x, i > 0 ? c.compare(w[i - 1], x) : 0])));";
    let mut child = Command::new("node")
        .args(["-e", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("node is needed for this test (./scripts/test checks for it)");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(&words).unwrap().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let sorted: Vec<(String, i32)> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sorted.len(), words.len());
    let mut disagreements = Vec::new();
    for pair in sorted.windows(2) {
        let (a, b) = (&pair[0].0, &pair[1].0);
        let node = pair[1].1.cmp(&0);
        let ours = settee_json::collate::strings(a, b);
        if ours != node {
            disagreements.push(format!("{a:?} {b:?}: node {node:?}, ours {ours:?}"));
        }
        assert_ne!(ours, Ordering::Greater, "{a:?} must not sort after {b:?}");
        let key = |s: &String| {
            viewkey::encoded(
                &serde_json::Value::String(s.clone()),
                viewkey::Collation::Unicode,
            )
        };
        assert_eq!(
            key(a).cmp(&key(b)),
            node,
            "view key bytes of {a:?} and {b:?} order as ICU does"
        );
    }
    assert!(disagreements.is_empty(), "{disagreements:#?}");
}
