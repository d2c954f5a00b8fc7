use super::*;
use crate::ingress_controllers::known;

const NGINX: &str = "nginx.ingress.kubernetes.io/";

fn target(id: &str) -> &'static KnownController {
    by_id(id).unwrap_or_else(|| panic!("{id} is not in the controller table"))
}

fn v(text: &str) -> Version {
    text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn verdict(key: &str, id: &str, version: &str) -> Verdict {
    catalog()
        .judge(&format!("{NGINX}{key}"), target(id), v(version))
        .verdict
}

/// A catalog of one source and the given rows.
fn with_rows(rows: &str) -> Result<Catalog, CatalogError> {
    Catalog::parse(&format!(
        r#"{{"revision": 1, "sources": {{"doc": {{"document": "d", "version": "1", "url": "u"}}}},
            "host_wide": [], "rows": [{rows}]}}"#
    ))
}

#[test]
fn the_shipped_catalog_parses_and_every_source_is_used() {
    let catalog = Catalog::parse(DATA).unwrap_or_else(|e| panic!("{e}"));
    let used: BTreeSet<&str> = catalog
        .rows
        .values()
        .flatten()
        .map(|r| r.source.as_str())
        .chain(catalog.host_wide.iter().map(|m| m.source.as_str()))
        .collect();
    let given: BTreeSet<&str> = catalog.sources.keys().map(String::as_str).collect();
    assert_eq!(used, given);
}

#[test]
fn a_row_without_a_source_is_refused() {
    let error = with_rows(
        r#"{"annotation": "nginx.ingress.kubernetes.io/x", "target": "haproxy", "since": "1.0", "verdict": "unsupported"}"#,
    )
    .map(|_| ())
    .unwrap_err();
    assert!(matches!(error, CatalogError::NoSource { .. }), "{error}");
    let error = with_rows(
        r#"{"annotation": "nginx.ingress.kubernetes.io/x", "target": "haproxy", "since": "1.0", "verdict": "unsupported", "source": "elsewhere"}"#,
    )
    .map(|_| ())
    .unwrap_err();
    assert!(error.to_string().contains("\"elsewhere\""), "{error}");
    // A source with an empty version is no source.
    let error = Catalog::parse(
        r#"{"revision": 1, "sources": {"doc": {"document": "d", "version": " ", "url": "u"}}, "host_wide": [], "rows": []}"#,
    )
    .map(|_| ())
    .unwrap_err();
    assert!(matches!(error, CatalogError::EmptySource(_)), "{error}");
}

#[test]
fn two_rows_of_one_key_target_and_version_are_refused() {
    let row = |verdict: &str| {
        format!(
            r#"{{"annotation": "nginx.ingress.kubernetes.io/x", "target": "traefik-ingress-nginx", "since": "3.7", "verdict": "{verdict}", "source": "doc"}}"#
        )
    };
    let error = with_rows(&format!("{}, {}", row("supported"), row("unsupported")))
        .map(|_| ())
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("since 3.7.0: two rows (supported and unsupported)"),
        "{error}"
    );
    // "3.7" and "3.7.0" are the same version.
    let error = with_rows(&format!(
        "{}, {}",
        row("supported"),
        row("supported").replace("\"3.7\"", "\"v3.7.0\"")
    ))
    .map(|_| ())
    .unwrap_err();
    assert!(matches!(error, CatalogError::Conflict { .. }), "{error}");
    // At different versions they are a history, not a contradiction.
    assert!(
        with_rows(&format!(
            "{}, {}",
            row("unsupported").replace("3.7", "3.6"),
            row("supported")
        ))
        .is_ok()
    );
}

#[test]
fn a_rename_must_name_a_key_the_target_reads() {
    let rename = |to: &str| {
        format!(
            r#"{{"annotation": "nginx.ingress.kubernetes.io/x", "target": "haproxy", "since": "1.0", "verdict": "renamed", "renamed_to": "{to}", "source": "doc"}}"#
        )
    };
    assert!(with_rows(&rename("haproxy.org/x")).is_ok());
    for wrong in ["nginx.org/x", "nginx.ingress.kubernetes.io/x"] {
        assert!(
            matches!(
                with_rows(&rename(wrong)),
                Err(CatalogError::BadRename { .. })
            ),
            "{wrong}"
        );
    }
    assert!(matches!(
        with_rows(
            r#"{"annotation": "a/x", "target": "nobody", "since": "1.0", "verdict": "supported", "source": "doc"}"#
        ),
        Err(CatalogError::UnknownTarget { .. })
    ));
}

#[test]
fn versions_parse_as_image_tags_write_them() {
    assert_eq!(v("3.7"), Version(3, 7, 0));
    assert_eq!(v("v3.6.2"), Version(3, 6, 2));
    assert_eq!(v("v5.4.0-alpine"), Version(5, 4, 0));
    for bad in ["", "3", "latest", "3.x", "3.7.1.2", "v"] {
        assert!(bad.parse::<Version>().is_err(), "{bad:?}");
    }
    assert!(v("3.6.10") > v("3.6.9"));
}

#[test]
fn traefik_reads_what_its_documentation_lists_for_its_version() {
    // Listed as supported since 3.6.
    assert_eq!(
        verdict("use-regex", "traefik-ingress-nginx", "3.6.2"),
        Verdict::Supported
    );
    // Listed as unsupported in 3.6, supported from 3.7.0.
    assert_eq!(
        verdict("rewrite-target", "traefik-ingress-nginx", "3.6.24"),
        Verdict::Unsupported
    );
    assert_eq!(
        verdict("rewrite-target", "traefik-ingress-nginx", "3.7.0"),
        Verdict::Supported
    );
    // A patch release changes a row: enable-global-auth from 3.7.2.
    assert_eq!(
        verdict("enable-global-auth", "traefik-ingress-nginx", "3.7.1"),
        Verdict::Unsupported
    );
    assert_eq!(
        verdict("enable-global-auth", "traefik-ingress-nginx", "3.7.2"),
        Verdict::Supported
    );
    // Listed from 3.6.7 only: before, no row holds, and Traefik reads the prefix.
    assert_eq!(
        verdict("cors-expose-headers", "traefik-ingress-nginx", "3.6.6"),
        Verdict::Unknown
    );
    // Below the first documented version nothing is known.
    assert_eq!(
        verdict("use-regex", "traefik-ingress-nginx", "3.5.0"),
        Verdict::Unknown
    );
    // A key nobody lists, under a prefix Traefik reads.
    assert_eq!(
        verdict("no-such-thing", "traefik-ingress-nginx", "3.7.9"),
        Verdict::Unknown
    );
    let judged = catalog().judge(
        &format!("{NGINX}limit-rps"),
        target("traefik-ingress-nginx"),
        v("3.7"),
    );
    assert_eq!(judged.source, Some("traefik-docs-3.7"));
    assert!(judged.note.is_some_and(|n| n.contains("429")));
}

#[test]
fn f5_and_haproxy_rename_where_their_documentation_maps_a_key() {
    assert_eq!(
        verdict("rewrite-target", "f5-nginx", "5.3.0"),
        Verdict::Renamed {
            to: "nginx.org/rewrite-target".to_owned(),
            same_value: true
        }
    );
    // Before the release that reads nginx.org/rewrite-target, nothing F5 reads means it.
    assert_eq!(
        verdict("rewrite-target", "f5-nginx", "5.2.1"),
        Verdict::Unsupported
    );
    assert_eq!(
        verdict("use-regex", "f5-nginx", "5.5"),
        Verdict::Unsupported
    );
    assert_eq!(
        verdict("ssl-redirect", "haproxy", "3.2"),
        Verdict::Renamed {
            to: "haproxy.org/ssl-redirect".to_owned(),
            same_value: true
        }
    );
    // HAProxy reads nothing under nginx's prefix: not listed is unsupported, not unknown.
    assert_eq!(
        verdict("proxy-body-size", "haproxy", "3.2"),
        Verdict::Unsupported
    );
}

#[test]
fn a_target_is_found_by_its_controller_string_with_a_suffix() {
    let haproxy = known("haproxy.org/ingress-controller/haproxy").map(|c| c.id);
    assert_eq!(haproxy, Some("haproxy"));
    assert_eq!(
        known("nginx.org/ingress-controller").map(|c| c.id),
        Some("f5-nginx")
    );
    assert_eq!(known("haproxy.org/ingress-controllerX"), None);
    // Traefik's ingress-nginx provider has no controller string of its own.
    assert!(target("traefik-ingress-nginx").controllers.is_empty());
}

#[test]
fn the_newest_version_is_the_last_a_row_starts_at() {
    assert_eq!(catalog().newest("traefik-ingress-nginx"), Some(v("3.7.2")));
    assert_eq!(catalog().newest("istio"), None);
}

#[test]
fn renames_for_keeps_only_keys_whose_value_carries_over() {
    let keys = [
        "nginx.ingress.kubernetes.io/rewrite-target",
        "nginx.ingress.kubernetes.io/proxy-buffering",
        "nginx.ingress.kubernetes.io/use-regex",
        "example.com/x",
    ];
    assert_eq!(
        catalog().renames_for(keys, target("f5-nginx"), v("5.4")),
        [(
            "nginx.ingress.kubernetes.io/rewrite-target".to_owned(),
            "nginx.org/rewrite-target".to_owned()
        )]
    );
    // HAProxy's path-rewrite takes another form of value with capture groups: not renamed.
    assert!(
        catalog()
            .renames_for(keys, target("haproxy"), v("3.2"))
            .is_empty()
    );
    assert!(
        catalog()
            .renames_for(keys, target("f5-nginx"), v("5.2"))
            .is_empty()
    );
}

#[test]
fn use_regex_is_marked_host_wide() {
    assert!(catalog().host_wide(&format!("{NGINX}use-regex")).is_some());
    assert!(
        catalog()
            .host_wide(&format!("{NGINX}ssl-redirect"))
            .is_none()
    );
}

/// `docs/migrate.md`'s table between the catalog-table markers is [`support_table`] of the
/// shipped data; `make docs` (`STYRMIN_WRITE_DOCS=1`) rewrites it.
#[test]
fn migrate_md_table_is_the_data() {
    const START: &str =
        "<!-- catalog-table: written from webhook/src/annotation_catalog.json by `make docs` -->\n";
    const END: &str = "<!-- /catalog-table -->";
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/migrate.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (Some(start), Some(end)) = (text.find(START), text.find(END)) else {
        panic!("docs/migrate.md: the catalog-table markers are missing");
    };
    let start = start + START.len();
    let want = support_table(catalog());
    if std::env::var_os("STYRMIN_WRITE_DOCS").is_some() {
        let written = format!("{}{want}{}", &text[..start], &text[end..]);
        std::fs::write(&path, written).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    assert_eq!(
        &text[start..end],
        want,
        "docs/migrate.md: the catalog table differs from the data (run `make docs`)"
    );
}

#[test]
fn the_table_counts_every_nginx_key_once_per_line() {
    let table = support_table(catalog());
    let keys = catalog().annotations(NGINX).len();
    for line in table
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| target"))
    {
        let counts: usize = line
            .split('|')
            .skip(3)
            .filter_map(|cell| cell.trim().parse::<usize>().ok())
            .sum();
        assert_eq!(counts, keys, "{line}");
    }
    assert!(
        table.contains("| Traefik (Kubernetes Ingress NGINX provider) | 3.7.0 |"),
        "{table}"
    );
}
