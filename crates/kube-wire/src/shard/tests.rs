use super::cel::{self, Expr, Literal};
use super::*;

const UID: &str = "object.metadata.uid";
const NS: &str = "object.metadata.namespace";

fn err(input: &str) -> String {
    match ShardSelector::parse(input) {
        Ok(s) => panic!("{input:?} parsed as {s}"),
        Err(e) => e.to_string(),
    }
}

fn ok(input: &str) -> ShardSelector {
    ShardSelector::parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"))
}

/// A requirement as kube's `Requirements()` lists it: key, start, end as written.
type Req = (String, String, String);

fn reqs(s: &ShardSelector) -> Vec<Req> {
    s.ranges()
        .iter()
        .map(|r| {
            (
                s.field().path().to_string(),
                format!("0x{:016x}", r.start()),
                format!("0x{:016x}", r.end()),
            )
        })
        .collect()
}

fn req(key: &str, start: &str, end: &str) -> Req {
    (key.into(), start.into(), end.into())
}

fn range(start: &str, end: &str) -> String {
    format!("shardRange({UID}, '{start}', '{end}')")
}

const Z: &str = "0x0000000000000000";
const HALF: &str = "0x8000000000000000";
const TOP: &str = "0x10000000000000000";

/// kube's `TestParse` (apiserver `pkg/sharding/parser_test.go` at v0.36.3): its inputs and
/// expectations, and for its error cases the message kube's parser words.
#[test]
fn kubes_parser_cases() {
    let good: &[(&str, &str, Vec<Req>)] = &[
        (
            "single requirement with uid",
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
            vec![req(UID, Z, HALF)],
        ),
        (
            "full range with 2^64 end",
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')",
            vec![req(UID, Z, TOP)],
        ),
        (
            "namespace field",
            "shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')",
            vec![req(NS, "0x00000000000000aa", "0x00000000000000ff")],
        ),
        (
            "two requirements with ||",
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
            vec![req(UID, Z, HALF), req(UID, HALF, TOP)],
        ),
        (
            "three requirements with ||",
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000005') || shardRange(object.metadata.uid, '0x0000000000000005', '0x000000000000000a') || shardRange(object.metadata.uid, '0x000000000000000a', '0x000000000000000f')",
            vec![
                req(UID, Z, "0x0000000000000005"),
                req(UID, "0x0000000000000005", "0x000000000000000a"),
                req(UID, "0x000000000000000a", "0x000000000000000f"),
            ],
        ),
        (
            "no spaces",
            "shardRange(object.metadata.uid,'0x0000000000000000','0x8000000000000000')",
            vec![req(UID, Z, HALF)],
        ),
        (
            "extra whitespace",
            "  shardRange( object.metadata.uid ,  '0x0000000000000000' ,  '0x8000000000000000' )  ",
            vec![req(UID, Z, HALF)],
        ),
    ];
    for (name, input, want) in good {
        assert_eq!(reqs(&ok(input)), *want, "{name}");
    }
    let bad: &[(&str, &str, &str)] = &[
        (
            "empty string",
            "",
            "empty shard selector is not allowed; omit the parameter for unfiltered lists",
        ),
        (
            "missing 0x prefix on start",
            "shardRange(object.metadata.uid, '0000000000000000', '0x8000000000000000')",
            r#"hexStart must have '0x' prefix, got "0000000000000000""#,
        ),
        (
            "missing 0x prefix on end",
            "shardRange(object.metadata.uid, '0x0000000000000000', '8000000000000000')",
            r#"hexEnd must have '0x' prefix, got "8000000000000000""#,
        ),
        (
            "empty after 0x prefix",
            "shardRange(object.metadata.uid, '0x', '0x8000000000000000')",
            "hexStart: hex value is required after '0x'",
        ),
        (
            "name field unsupported",
            "shardRange(object.metadata.name, '0x00', '0x80')",
            r#"unsupported field path "object.metadata.name"; supported: object.metadata.uid, object.metadata.namespace"#,
        ),
        (
            "unsupported field",
            "shardRange(object.metadata.labels, '0x00', '0x80')",
            r#"unsupported field path "object.metadata.labels"; supported: object.metadata.uid, object.metadata.namespace"#,
        ),
        (
            "unknown function",
            "invalidFunc(object.metadata.uid, '0x00', '0x80')",
            r#"unsupported function "invalidFunc"; only shardRange() and || are allowed"#,
        ),
        (
            "hex too long (18 chars)",
            "shardRange(object.metadata.uid, '0x000000000000000000', '0x80')",
            r#"hexStart: hex value too long (18 chars, max 17): "000000000000000000""#,
        ),
        (
            "invalid hex char",
            "shardRange(object.metadata.uid, '0x0g', '0x80')",
            r#"hexStart: invalid hex character "g" in "0x0g""#,
        ),
        (
            "&& operator not allowed",
            "shardRange(object.metadata.uid, '0x0', '0x8') && shardRange(object.metadata.uid, '0x8', '0xf')",
            r#"unsupported function "_&&_"; only shardRange() and || are allowed"#,
        ),
        (
            "integer literal instead of string",
            "shardRange(object.metadata.uid, 0, 8)",
            // Go's `%T` of the literal's value (`types.Int.Value()` is an int64).
            "hexStart must be a string literal, got int64",
        ),
        (
            "comparison operator",
            "object.metadata.uid > '0x0'",
            r#"unsupported function "_>_"; only shardRange() and || are allowed"#,
        ),
        (
            "wrong number of arguments",
            "shardRange(object.metadata.uid, '0x0')",
            "shardRange() requires exactly 3 arguments, got 2",
        ),
        (
            "nested function call",
            "shardRange(object.metadata.uid, hex(0), '0x8')",
            "hexStart must be a string literal (e.g. '0xff'), got expression kind 1",
        ),
        (
            "mixed field keys",
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')",
            r#"all shard ranges must use the same field, got "object.metadata.uid" and "object.metadata.namespace""#,
        ),
        (
            "short hex rejected",
            "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
            r#"hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" (did you mean "0x0000000000000000"?)"#,
        ),
        (
            "short hex rejected on end",
            "shardRange(object.metadata.uid, '0x0000000000000000', '0xff')",
            r#"hexEnd must be a 0x-prefixed 16-digit hex value, got "0xff" (did you mean "0x00000000000000ff"?)"#,
        ),
        (
            "start equals end",
            "shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')",
            "shard range start 0x8000000000000000 must be less than end 0x8000000000000000",
        ),
        (
            "start greater than end",
            "shardRange(object.metadata.uid, '0xffffffffffffffff', '0x0000000000000000')",
            "shard range start 0xffffffffffffffff must be less than end 0x0000000000000000",
        ),
    ];
    for (name, input, want) in bad {
        assert_eq!(
            err(input),
            format!("invalid shard selector: {want}"),
            "{name}"
        );
    }
}

/// kube's `TestParseRoundTrip`: the canonical form of a canonical input is the input.
#[test]
fn kubes_round_trips() {
    for input in [
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
        "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')",
        "shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')",
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
    ] {
        let s = ok(input);
        assert_eq!(s.to_string(), input);
        assert_eq!(ok(&s.to_string()), s);
    }
}

/// Every error of kube's walk, reached by some input, with its text.
#[test]
fn every_walk_error() {
    let r = |a: &str, b: &str| format!("shardRange({UID}, {a}, {b})");
    let cases: Vec<(String, &str)> = vec![
        (
            " \t\n ".into(),
            "empty shard selector is not allowed; omit the parameter for unfiltered lists",
        ),
        // Operators by cel-go's names.
        (
            format!("{} || !{}", range(Z, HALF), range(HALF, TOP)),
            r#"unsupported function "!_"; only shardRange() and || are allowed"#,
        ),
        (
            format!("-{}", range(Z, HALF)),
            r#"unsupported function "-_"; only shardRange() and || are allowed"#,
        ),
        (
            format!(
                "{} ? {} : {}",
                range(Z, HALF),
                range(Z, HALF),
                range(Z, HALF)
            ),
            r#"unsupported function "_?_:_"; only shardRange() and || are allowed"#,
        ),
        (
            format!("{} == true", range(Z, HALF)),
            r#"unsupported function "_==_"; only shardRange() and || are allowed"#,
        ),
        (
            format!("{}[0]", range(Z, HALF)),
            r#"unsupported function "_[_]"; only shardRange() and || are allowed"#,
        ),
        (
            format!("{} + 1", range(Z, HALF)),
            r#"unsupported function "_+_"; only shardRange() and || are allowed"#,
        ),
        (
            "a in b".into(),
            r#"unsupported function "@in"; only shardRange() and || are allowed"#,
        ),
        (
            "shardrange(a, b, c)".into(),
            r#"unsupported function "shardrange"; only shardRange() and || are allowed"#,
        ),
        (
            ".shardRange(a, b, c)".into(),
            r#"unsupported function ".shardRange"; only shardRange() and || are allowed"#,
        ),
        // Kinds, by cel-go's numbers.
        (
            format!("'{Z}'"),
            "unexpected expression kind 5; expected shardRange() call or || operator",
        ),
        (
            "object".into(),
            "unexpected expression kind 3; expected shardRange() call or || operator",
        ),
        (
            "[1]".into(),
            "unexpected expression kind 4; expected shardRange() call or || operator",
        ),
        (
            "{1: 2}".into(),
            "unexpected expression kind 6; expected shardRange() call or || operator",
        ),
        (
            UID.into(),
            "unexpected expression kind 7; expected shardRange() call or || operator",
        ),
        (
            "a.B{c: 1}".into(),
            "unexpected expression kind 8; expected shardRange() call or || operator",
        ),
        (
            format!("{} || true", range(Z, HALF)),
            "unexpected expression kind 5; expected shardRange() call or || operator",
        ),
        (
            "shardRange()".into(),
            "shardRange() requires exactly 3 arguments, got 0",
        ),
        (
            format!("shardRange({UID}, '{Z}', '{HALF}', '{TOP}')"),
            "shardRange() requires exactly 3 arguments, got 4",
        ),
        (
            format!("shardRange('x', '{Z}', '{HALF}')"),
            "shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind 5",
        ),
        (
            format!("shardRange(f().metadata.uid, '{Z}', '{HALF}')"),
            "shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind 1",
        ),
        (
            format!("shardRange(object['metadata'].uid, '{Z}', '{HALF}')"),
            "shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind 1",
        ),
        (
            format!("shardRange(metadata.uid, '{Z}', '{HALF}')"),
            r#"unsupported field path "metadata.uid"; supported: object.metadata.uid, object.metadata.namespace"#,
        ),
        (
            format!("shardRange(.object.metadata.uid, '{Z}', '{HALF}')"),
            r#"unsupported field path ".object.metadata.uid"; supported: object.metadata.uid, object.metadata.namespace"#,
        ),
        (
            format!("shardRange(uid, '{Z}', '{HALF}')"),
            r#"unsupported field path "uid"; supported: object.metadata.uid, object.metadata.namespace"#,
        ),
        (
            r("object.metadata.uid", "'x'"),
            "hexStart must be a string literal (e.g. '0xff'), got expression kind 7",
        ),
        (
            r("[]", "'x'"),
            "hexStart must be a string literal (e.g. '0xff'), got expression kind 4",
        ),
        (
            r(&format!("'{Z}'"), "x"),
            "hexEnd must be a string literal (e.g. '0xff'), got expression kind 3",
        ),
        (
            r("0u", "1"),
            "hexStart must be a string literal, got uint64",
        ),
        (r("-1", "1"), "hexStart must be a string literal, got int64"),
        (
            r("0x10", "1"),
            "hexStart must be a string literal, got int64",
        ),
        (
            r("1.5", "1"),
            "hexStart must be a string literal, got float64",
        ),
        (
            r("true", "1"),
            "hexStart must be a string literal, got bool",
        ),
        (
            r(&format!("b'{Z}'"), "1"),
            "hexStart must be a string literal, got []uint8",
        ),
        (
            r("null", "1"),
            "hexStart must be a string literal, got structpb.NullValue",
        ),
        (
            r(&format!("'{Z}'"), "-5"),
            "hexEnd must be a string literal, got int64",
        ),
        (
            r("'0X0000000000000000'", "1"),
            r#"hexStart must have '0x' prefix, got "0X0000000000000000""#,
        ),
        (r("''", "1"), r#"hexStart must have '0x' prefix, got """#),
        (
            r("' 0x0000000000000000'", "1"),
            r#"hexStart must have '0x' prefix, got " 0x0000000000000000""#,
        ),
        (r("'0x'", "1"), "hexStart: hex value is required after '0x'"),
        (
            r(&format!("'{Z}'"), "'0x'"),
            "hexEnd: hex value is required after '0x'",
        ),
        (
            r("'0x000000000000000000'", "1"),
            r#"hexStart: hex value too long (18 chars, max 17): "000000000000000000""#,
        ),
        // Go counts bytes: nine two-byte characters are 18.
        (
            r("'0xééééééééé'", "1"),
            r#"hexStart: hex value too long (18 chars, max 17): "ééééééééé""#,
        ),
        (
            r("'0x000000000000000A'", "1"),
            r#"hexStart: invalid hex character "A" in "0x000000000000000A""#,
        ),
        (
            r("'0x00000000000000é'", "1"),
            r#"hexStart: invalid hex character "é" in "0x00000000000000é""#,
        ),
        (
            r("'0x000000000000000\\n'", "1"),
            r#"hexStart: invalid hex character "\n" in "0x000000000000000\n""#,
        ),
        (
            r("'0x 0'", "1"),
            r#"hexStart: invalid hex character " " in "0x 0""#,
        ),
        (
            r(&format!("'{Z}'"), "'0x10000000000000001'"),
            r#"hexEnd: 17-digit hex value must be '0x10000000000000000' (2^64), got "0x10000000000000001""#,
        ),
        (
            r(&format!("'{Z}'"), "'0x20000000000000000'"),
            r#"hexEnd: 17-digit hex value must be '0x10000000000000000' (2^64), got "0x20000000000000000""#,
        ),
        (
            r("'0x1'", "1"),
            r#"hexStart must be a 0x-prefixed 16-digit hex value, got "0x1" (did you mean "0x0000000000000001"?)"#,
        ),
        (
            r(&format!("'{Z}'"), "'0x000000000000000'"),
            r#"hexEnd must be a 0x-prefixed 16-digit hex value, got "0x000000000000000" (did you mean "0x0000000000000000"?)"#,
        ),
        (
            r(&format!("'{TOP}'"), &format!("'{TOP}'")),
            "shard range start 0x10000000000000000 must be less than end 0x10000000000000000",
        ),
        (
            r(&format!("'{TOP}'"), "'0xffffffffffffffff'"),
            "shard range start 0x10000000000000000 must be less than end 0xffffffffffffffff",
        ),
        // The range is checked whole before the next one; the fields only at the end.
        (
            format!("shardRange({NS}, '{Z}', '{HALF}') || {}", r("'0x1'", "1")),
            r#"hexStart must be a 0x-prefixed 16-digit hex value, got "0x1" (did you mean "0x0000000000000001"?)"#,
        ),
        (
            format!(
                "{} || shardRange({NS}, '{Z}', '{HALF}') || shardRange({NS}, '{Z}', '{HALF}')",
                range(Z, HALF)
            ),
            r#"all shard ranges must use the same field, got "object.metadata.uid" and "object.metadata.namespace""#,
        ),
        (
            format!("shardRange({NS}, '{Z}', '{HALF}') || {}", range(Z, HALF)),
            r#"all shard ranges must use the same field, got "object.metadata.namespace" and "object.metadata.uid""#,
        ),
        // cel-go's errors, after `CEL parse error: `.
        (
            "shardRange(".into(),
            "CEL parse error: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}",
        ),
        (
            format!("{} {}", range(Z, HALF), range(HALF, TOP)),
            "CEL parse error: Syntax error: mismatched input 'shardRange' expecting <EOF>",
        ),
        (
            format!("{} | {}", range(Z, HALF), range(HALF, TOP)),
            "CEL parse error: Syntax error: token recognition error at: '| '",
        ),
        (
            format!("shardRange({UID}, '{Z}', '{HALF}'"),
            "CEL parse error: Syntax error: missing ')' at '<EOF>'",
        ),
        (
            format!("shardRange({UID}, '{Z}' '{HALF}')"),
            "CEL parse error: Syntax error: extraneous input ''0x8000000000000000'' expecting ')'",
        ),
        (
            format!("shardRange({UID}, '{Z}, '{HALF}')"),
            "CEL parse error: Syntax error: token recognition error at: '')'",
        ),
        (
            "as(a, b, c)".into(),
            "CEL parse error: reserved identifier: as",
        ),
        (
            format!("shardRange({UID}, '\\ud800', '{HALF}')"),
            "CEL parse error: invalid unicode code point",
        ),
    ];
    for (input, want) in cases {
        assert_eq!(
            err(&input),
            format!("invalid shard selector: {want}"),
            "{input}"
        );
    }
}

/// `|| operator requires exactly 2 arguments` cannot come from cel-go's parser, which always
/// builds two; the walk still refuses another count, as kube's does.
#[test]
fn or_with_other_than_two_operands() {
    let call = |n: usize| Expr::Call {
        function: "_||_".into(),
        target: None,
        args: vec![Expr::Literal(Literal::Null); n],
    };
    for n in [0, 1, 3] {
        assert_eq!(
            walk(&call(n), &mut Vec::new()),
            Err(ShardParseError::OrArity)
        );
    }
    assert_eq!(
        ShardSelectorError(ShardParseError::OrArity).to_string(),
        "invalid shard selector: || operator requires exactly 2 arguments"
    );
}

#[test]
fn bounds_are_any_string_literal() {
    let want = ok(&range(Z, HALF));
    for (a, b) in [
        (format!("\"{Z}\""), format!("\"{HALF}\"")),
        (format!("r'{Z}'"), format!("R\"{HALF}\"")),
        (format!("'''{Z}'''"), format!("\"\"\"{HALF}\"\"\"")),
        (format!("r'''{Z}'''"), format!("'\\x30x{}'", &HALF[2..])),
        (
            format!("'\\060x{}'", &Z[2..]),
            format!("'\\u0030x{}'", &HALF[2..]),
        ),
    ] {
        assert_eq!(ok(&format!("shardRange({UID}, {a}, {b})")), want, "{a} {b}");
    }
    // A raw string keeps its backslash; a triple-quoted one its newline.
    assert!(err(&format!("shardRange({UID}, r'\\x30', '{HALF}')")).contains(r#"got "\\x30""#));
    assert!(
        err(&format!("shardRange({UID}, '''0x\n0''', '{HALF}')"))
            .contains(r#"character "\n" in "0x\n0""#)
    );
}

/// Parentheses and white space anywhere, comments, and a receiver call, whose receiver kube
/// never looks at.
#[test]
fn free_form() {
    let want = ok(&format!(
        "{} || {} || {}",
        range(Z, "0x0000000000000001"),
        range("0x0000000000000001", HALF),
        range(HALF, TOP)
    ));
    for input in [
        format!(
            "(({} || ({})) || (((({})))))",
            range(Z, "0x0000000000000001"),
            range("0x0000000000000001", HALF),
            range(HALF, TOP)
        ),
        format!(
            "\n\t{}||{}\r\n||\u{c}{} // the last one\n",
            range(Z, "0x0000000000000001"),
            range("0x0000000000000001", HALF),
            range(HALF, TOP)
        ),
        format!(
            "shardRange(object . metadata\n.uid,'{Z}','0x0000000000000001')||x.y.shardRange((object).metadata.uid,('0x0000000000000001'),'{HALF}')||{}",
            range(HALF, TOP)
        ),
        format!(
            "\u{a0}{} || {} || {}\u{2003}",
            range(Z, "0x0000000000000001"),
            range("0x0000000000000001", HALF),
            range(HALF, TOP)
        ),
    ] {
        assert_eq!(ok(&input), want, "{input}");
    }
}

#[test]
fn many_ors_keep_their_order() {
    let n = 1000u128;
    let step = HASH_SPACE_END / n;
    let bounds: Vec<u128> = (0..=n)
        .map(|i| if i == n { HASH_SPACE_END } else { i * step })
        .collect();
    let text = bounds
        .windows(2)
        .map(|w| format!("shardRange({NS},'0x{:016x}','0x{:016x}')", w[0], w[1]))
        .collect::<Vec<_>>()
        .join("||");
    let s = ok(&text);
    assert_eq!(s.field(), ShardField::Namespace);
    let got: Vec<(u128, u128)> = s.ranges().iter().map(|r| (r.start(), r.end())).collect();
    let want: Vec<(u128, u128)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
    assert_eq!(got, want);
    assert_eq!(ok(&s.to_string()), s);
    // Overlaps and repeats are not kube's business.
    let twice = ok(&format!("{} || {}", range(Z, TOP), range(Z, TOP)));
    assert_eq!(twice.ranges().len(), 2);
}

#[test]
fn hash_vectors() {
    for (input, want) in [
        ("", 0xcbf29ce484222325u64),
        ("a", 0xaf63dc4c8601ec8c),
        ("default", 0xebada5168620c5fe),
        ("kube-system", 0xdf65c7bc1d82b35e),
        ("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", 0x93754b7248a00eb9),
    ] {
        assert_eq!(shard_hash(input.as_bytes()), want, "{input:?}");
    }
}

#[test]
fn ranges_hold_their_start_not_their_end() {
    let h = shard_hash(b"default");
    let at = |start: u128, end: u128| {
        ShardSelector::new(
            ShardField::Namespace,
            vec![ShardRange::new(start, end).unwrap()],
        )
        .unwrap()
    };
    let h128 = u128::from(h);
    assert!(at(h128, h128 + 1).matches("", "default"));
    assert!(!at(h128 + 1, h128 + 2).matches("", "default"));
    assert!(!at(h128 - 1, h128).matches("", "default"));
    assert!(at(h128 - 1, h128).matches_hash(h - 1));
    // The last hash is in the range that ends at 2^64.
    assert!(ok(&range("0xffffffffffffffff", TOP)).matches_hash(u64::MAX));
    assert!(!ok(&range(Z, "0xffffffffffffffff")).matches_hash(u64::MAX));
    // A cluster-scoped object (namespace "") hashes to FNV's offset basis.
    let cluster = ok(&format!(
        "shardRange({NS}, '0xcbf29ce484222325', '0xcbf29ce484222326')"
    ));
    assert!(cluster.matches("any-uid", ""));
    assert!(!cluster.matches("any-uid", "default"));
    // By uid, the namespace does not matter.
    let u = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
    let by_uid = ok(&range("0x93754b7248a00eb9", "0x93754b7248a00eba"));
    assert!(by_uid.matches(u, "default") && by_uid.matches(u, ""));
    assert!(!by_uid.matches("other", "default"));
    assert_eq!(ShardRange::new(5, 5), None);
    assert_eq!(ShardRange::new(0, HASH_SPACE_END + 1), None);
    assert_eq!(ShardSelector::new(ShardField::Uid, vec![]), None);
}

/// A tiny deterministic xorshift for the generated cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn canonical_form_round_trips() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for _ in 0..500 {
        let field = if rng.below(2) == 0 {
            ShardField::Uid
        } else {
            ShardField::Namespace
        };
        let ranges = (0..1 + rng.below(5))
            .map(|_| {
                let a = u128::from(rng.next());
                let b = if rng.below(4) == 0 {
                    HASH_SPACE_END
                } else {
                    u128::from(rng.next())
                };
                let (lo, hi) = if a < b { (a, b) } else { (b, a.max(b + 1)) };
                ShardRange::new(lo, hi).unwrap()
            })
            .collect();
        let s = ShardSelector::new(field, ranges).unwrap();
        let text = s.to_string();
        assert_eq!(ok(&text), s, "{text}");
        assert_eq!(ok(&text).to_string(), text);
    }
    // Whatever the spelling, the echo is canonical.
    let s = ok(&format!(
        "( shardRange(object.metadata.uid,\"{Z}\",r'{HALF}') )"
    ));
    assert_eq!(
        s.to_string(),
        format!("shardRange(object.metadata.uid, '{Z}', '{HALF}')")
    );
}

#[test]
fn limits_are_errors_not_crashes() {
    // 1 MB of input: cel-go's size limit, counted in code points after the trim.
    let big = format!("  {}  ", "(".repeat(1_000_000));
    assert_eq!(
        err(&big),
        "invalid shard selector: CEL parse error: expression code point size exceeds limit: size: 1000000, limit 100000"
    );
    let at_limit = format!(
        "{}||{}",
        range(Z, HALF),
        "(".repeat(100_000 - range(Z, HALF).len() - 2)
    );
    assert!(
        err(&at_limit).contains("recursion limit"),
        "{}",
        err(&at_limit)
    );
    let over = format!("é{}x", " ".repeat(99_999));
    assert_eq!(
        err(&over),
        "invalid shard selector: CEL parse error: expression code point size exceeds limit: size: 100001, limit 100000"
    );
    // Nesting: each parenthesis is one level of ANTLR's `expr` and `member` rules; inside 246,
    // the first argument's `member` (its two selects count, as left-recursive steps) is at the
    // 250th level, the limit. One more is too deep.
    let nested = |n: usize| format!("{}{}{}", "(".repeat(n), range(Z, HALF), ")".repeat(n));
    assert_eq!(ok(&nested(246)), ok(&range(Z, HALF)));
    let deep = "invalid shard selector: CEL parse error: expression recursion limit exceeded: 250";
    assert_eq!(err(&nested(247)), deep);
    assert_eq!(err(&nested(49_000)), deep);
    for n in [251, 1000, 20_000] {
        for (open, close) in [
            ("(", ")"),
            ("[", "]"),
            ("f(", ")"),
            ("{1:", "}"),
            ("a[", "]"),
            ("!(", ")"),
        ] {
            let input = format!("{}x{}", open.repeat(n), close.repeat(n));
            assert_eq!(err(&input), deep, "{open} × {n}");
        }
        // Chains of left-recursive rules count too.
        for op in [".a", "[0]", "+a", "*a", "<a", ".f()"] {
            assert_eq!(err(&format!("a{}", op.repeat(n))), deep, "{op} × {n}");
        }
        // The tail of a conditional is an expression of its own.
        assert_eq!(err(&format!("{}c", "a ? b : ".repeat(n.min(10_000)))), deep);
    }
    // Long runs that ANTLR parses in a loop are no nesting at all.
    let many = format!("{}{}", "!".repeat(20_001), range(Z, HALF));
    let not = r#"invalid shard selector: unsupported function "!_"; only shardRange() and || are allowed"#;
    assert_eq!(err(&many), not);
    assert_eq!(
        ok(&format!("{}{}", "!".repeat(20_000), range(Z, HALF))),
        ok(&range(Z, HALF))
    );
    // Rules under their own limit can still nest deeper than cel-go's visitor allows.
    let mixed = format!("a{}{}", ".b".repeat(200), " + a".repeat(60));
    assert_eq!(
        err(&mixed),
        "invalid shard selector: CEL parse error: max recursion depth exceeded"
    );
    let fine = format!("a{}{}", ".b".repeat(150), " + a".repeat(60));
    assert!(err(&fine).contains("_+_"), "{}", err(&fine));
}

#[test]
fn deep_nesting_fits_a_small_stack() {
    // The deepest inputs the limits let through, and far deeper ones, parsed on a thread with a
    // 256 KiB stack (a tokio worker has 2 MiB): nesting costs the parser heap, not stack.
    let input = format!("{}{}{}", "(".repeat(246), range(Z, HALF), ")".repeat(246));
    let deepest = format!("{}x{}", "[".repeat(249), "]".repeat(249));
    let deeper = format!("{}x{}", "f(".repeat(40_000), ")".repeat(40_000));
    let done = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || {
            ShardSelector::parse(&input).is_ok()
                && ShardSelector::parse(&deepest).is_err()
                && ShardSelector::parse(&deeper).is_err()
        })
        .unwrap()
        .join()
        .unwrap();
    assert!(done);
}

/// Random bytes and random soups of CEL's tokens: parsing never panics.
#[test]
fn random_input_never_panics() {
    const PIECES: &[&str] = &[
        "shardRange",
        "(",
        ")",
        ",",
        "||",
        "&&",
        "|",
        "&",
        "object",
        ".",
        "metadata",
        "uid",
        "namespace",
        "'0x0000000000000000'",
        "'0x10000000000000000'",
        "\"0x8000000000000000\"",
        "'",
        "\"",
        "'''",
        "r'",
        "b'",
        "\\",
        "\\u",
        "\\x4",
        "[",
        "]",
        "{",
        "}",
        ":",
        "?",
        "!",
        "-",
        "+",
        "*",
        "/",
        "%",
        "<",
        "<=",
        "==",
        "!=",
        "in",
        "true",
        "null",
        "1",
        "0x",
        "1u",
        "1.5",
        "1e",
        ".5",
        "9223372036854775808",
        "`a`",
        " ",
        "\n",
        "//",
        "é",
        "\u{0}",
        "as",
        "A",
        "{a:",
        ".?",
        "[?",
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..4000 {
        let input = if i % 2 == 0 {
            let bytes: Vec<u8> = (0..rng.below(64)).map(|_| rng.next() as u8).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        } else {
            (0..rng.below(40))
                .map(|_| PIECES[rng.below(PIECES.len() as u64) as usize])
                .collect()
        };
        if let Ok(s) = ShardSelector::parse(&input) {
            assert_eq!(ok(&s.to_string()), s, "{input:?}");
        }
    }
}

// --- the CEL parser itself -------------------------------------------------------------------

/// A compact rendering of an AST: calls as `f(a, b)`, receiver calls as `t.f(a)`, literals in
/// Rust's debug form.
fn show(e: &Expr) -> String {
    let list = |xs: &[Expr]| xs.iter().map(show).collect::<Vec<_>>().join(", ");
    match e {
        Expr::Call {
            function,
            target: Some(t),
            args,
        } => format!("{}.{function}({})", show(t), list(args)),
        Expr::Call {
            function,
            target: None,
            args,
        } => format!("{function}({})", list(args)),
        Expr::Ident(n) => n.clone(),
        Expr::List(xs) => format!("[{}]", list(xs)),
        Expr::Literal(l) => format!("{l:?}"),
        Expr::Map(es) => format!(
            "{{{}}}",
            es.iter()
                .map(|(k, v)| format!("{}: {}", show(k), show(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Expr::Select { operand, field } => format!("{}.{field}", show(operand)),
        Expr::Struct { name, fields } => format!(
            "{name}{{{}}}",
            fields
                .iter()
                .map(|(k, v)| format!("{k}: {}", show(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn cel_ok(input: &str) -> String {
    show(&cel::parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}")))
}

fn cel_err(input: &str) -> String {
    match cel::parse(input) {
        Ok(e) => panic!("{input:?} parsed as {}", show(&e)),
        Err(e) => e,
    }
}

#[test]
fn cel_grammar() {
    for (input, want) in [
        ("a + b * c", "_+_(a, _*_(b, c))"),
        ("a - b - c", "_-_(_-_(a, b), c)"),
        ("a / b % c", "_%_(_/_(a, b), c)"),
        ("a < b == c", "_==_(_<_(a, b), c)"),
        ("a in b != c >= d", "_>=_(_!=_(@in(a, b), c), d)"),
        ("a || b && c", "_||_(a, _&&_(b, c))"),
        ("a || b || c || d", "_||_(_||_(a, b), _||_(c, d))"),
        ("a || b || c", "_||_(_||_(a, b), c)"),
        (
            "a && b && c && d && e",
            "_&&_(_&&_(_&&_(a, b), c), _&&_(d, e))",
        ),
        ("a ? b : c ? d : e", "_?_:_(a, b, _?_:_(c, d, e))"),
        ("a ? b || c : d", "_?_:_(a, _||_(b, c), d)"),
        ("!a", "!_(a)"),
        ("!!a", "a"),
        ("!!!a", "!_(a)"),
        ("-a", "-_(a)"),
        ("--a", "a"),
        ("-1", "Int(-1)"),
        ("- 1.5", "Double(-1.5)"),
        ("--1", "Int(1)"),
        ("---1", "-_(Int(1))"),
        ("4--4", "_-_(Int(4), Int(-4))"),
        ("-1u", "-_(Uint(1))"),
        ("!-1", "!_(Int(-1))"),
        ("-9223372036854775808", "Int(-9223372036854775808)"),
        ("0x1F + 0x1fu + 1U", "_+_(_+_(Int(31), Uint(31)), Uint(1))"),
        (
            "1e3 + .5 + 1.5e-1",
            "_+_(_+_(Double(1000.0), Double(0.5)), Double(0.15))",
        ),
        ("a.b.c", "a.b.c"),
        (".a.b", ".a.b"),
        ("a.b(c, d).e", "a.b(c, d).e"),
        ("f()", "f()"),
        (".f(x)", ".f(x)"),
        ("a[b][c]", "_[_](_[_](a, b), c)"),
        ("a.b{c: 1, d: e}", "a.b{c: Int(1), d: e}"),
        (".a.B{}", ".a.B{}"),
        ("A{c: 1,}", "A{c: Int(1)}"),
        ("{}", "{}"),
        ("{a: 1, 'b': [2],}", "{a: Int(1), String(\"b\"): [Int(2)]}"),
        ("{,}", "{}"),
        ("[]", "[]"),
        ("[,]", "[]"),
        ("[1, 2,]", "[Int(1), Int(2)]"),
        ("(((a)))", "a"),
        (
            "true && false || null",
            "_||_(_&&_(Bool(true), Bool(false)), Null)",
        ),
        ("inx || trueish", "_||_(inx, trueish)"),
        (
            "b'ab' + B\"\\xff\\001\"",
            "_+_(Bytes([97, 98]), Bytes([255, 1]))",
        ),
        (
            "'\\a\\b\\f\\n\\r\\t\\v\\\\\\'\\\"\\?\\`'",
            "String(\"\\u{7}\\u{8}\\u{c}\\n\\r\\t\\u{b}\\\\'\\\"?`\")",
        ),
        ("'\\xff\\u00e9\\U0001F600\\101'", "String(\"ÿé😀A\")"),
        (
            "r'\\n' + R\"\\\"",
            "_+_(String(\"\\\\n\"), String(\"\\\\\"))",
        ),
        ("'''a\n'b'''", "String(\"a\\n'b\")"),
        ("\"\"\"a\r\nb\"\"\"", "String(\"a\\nb\")"),
        ("a // comment\n + b", "_+_(a, b)"),
        ("a.namespace", "a.namespace"),
    ] {
        assert_eq!(cel_ok(input), want, "{input}");
    }
    assert_eq!(cel::parse("a.b(c)").unwrap().kind(), cel::Kind::Call);
    assert_eq!(cel::Kind::Struct.to_string(), "8");
    assert_eq!(cel::Kind::Comprehension as u8, 2);
}

#[test]
fn cel_visitor_errors() {
    for (input, want) in [
        ("as", "reserved identifier: as"),
        ("a + while", "reserved identifier: while"),
        ("namespace(x)", "reserved identifier: namespace"),
        ("9223372036854775808", "invalid int literal"),
        ("-9223372036854775809", "invalid int literal"),
        ("0xFFFFFFFFFFFFFFFFF", "invalid int literal"),
        ("18446744073709551616u", "invalid uint literal"),
        ("1.99e90000009", "invalid double literal"),
        ("'\\ud800'", "invalid unicode code point"),
        ("'\\U00110000'", "invalid unicode code point"),
        ("b'\\u0041'", "unable to unescape string"),
        ("a.?b", "unsupported syntax '.?'"),
        ("a[?b]", "unsupported syntax '[?'"),
        ("[?a]", "unsupported syntax '?'"),
        ("{?a: b}", "unsupported syntax '?'"),
        ("A{?a: b}", "unsupported syntax '?'"),
        ("a.`b`", "unsupported syntax: '`'"),
        ("A{`b`: 1}", "unsupported syntax: '`'"),
        // The first in the order cel-go's visitor goes.
        ("if + 9223372036854775808", "reserved identifier: if"),
        ("9223372036854775808 + if", "invalid int literal"),
    ] {
        assert_eq!(cel_err(input), want, "{input}");
    }
    assert_eq!(cel_ok("a.as"), "a.as");
    assert_eq!(cel_ok("A{as: 1}"), "A{as: Int(1)}");
}

#[test]
fn cel_syntax_errors() {
    const START: &str = "{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}";
    for (input, want) in [
        // cel-go's own test cases whose first error this parser words as ANTLR does.
        ("a | b", "Syntax error: token recognition error at: '| '".to_string()),
        ("1 + $", "Syntax error: token recognition error at: '$'".to_string()),
        ("\"\\xFh\"", "Syntax error: token recognition error at: '\"\\xFh'".to_string()),
        ("1 + 2\n3 +", "Syntax error: mismatched input '3' expecting <EOF>".to_string()),
        ("TestAllTypes(){}", "Syntax error: mismatched input '{' expecting <EOF>".to_string()),
        ("TestAllTypes{}()", "Syntax error: mismatched input '(' expecting <EOF>".to_string()),
        ("1 + +", format!("Syntax error: mismatched input '+' expecting {START}")),
        ("in", format!("Syntax error: mismatched input 'in' expecting {START}")),
        ("?", format!("Syntax error: mismatched input '?' expecting {START}")),
        ("{", "Syntax error: mismatched input '<EOF>' expecting {'[', '{', '}', '(', '.', ',', '-', '!', '?', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}".to_string()),
        ("{\"a\": 1}.\"a\"", "Syntax error: no viable alternative at input '.\"a\"'".to_string()),
        ("a.true", "Syntax error: mismatched input 'true' expecting IDENTIFIER".to_string()),
        ("{a}", "Syntax error: mismatched input '}' expecting ':'".to_string()),
        ("msg{:a}", "Syntax error: extraneous input ':' expecting {'}', ',', '?', IDENTIFIER, ESC_IDENTIFIER}".to_string()),
        // And others.
        ("", format!("Syntax error: mismatched input '<EOF>' expecting {START}")),
        ("(a", "Syntax error: missing ')' at '<EOF>'".to_string()),
        ("[a", "Syntax error: missing ']' at '<EOF>'".to_string()),
        ("a ? b", "Syntax error: mismatched input '<EOF>' expecting ':'".to_string()),
        ("'abc", "Syntax error: token recognition error at: ''abc'".to_string()),
        ("'a\nb'", "Syntax error: token recognition error at: ''a\\n'".to_string()),
        ("'\\q'", "Syntax error: token recognition error at: ''\\q'".to_string()),
        ("a = b", "Syntax error: token recognition error at: '= '".to_string()),
        ("a & b", "Syntax error: token recognition error at: '& '".to_string()),
        ("`a", "Syntax error: token recognition error at: '`a'".to_string()),
        ("a.", "Syntax error: no viable alternative at input '.<EOF>'".to_string()),
        ("a\u{b}", "Syntax error: token recognition error at: '\u{b}'".to_string()),
        // A lexer error before a syntax error is the first.
        ("#) (", "Syntax error: token recognition error at: '#'".to_string()),
        // A syntax error before the lexer has read that far is.
        (") a #", format!("Syntax error: extraneous input ')' expecting {START}")),
        // A triple quote that does not close is the empty string of two quotes, then a quote.
        ("'''a", "Syntax error: token recognition error at: ''a'".to_string()),
    ] {
        assert_eq!(cel_err(input), want, "{input:?}");
    }
}
