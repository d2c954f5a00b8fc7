//! Where the post-renderer's time goes, phase by phase, on a stream file:
//! `cargo run --release -p styrmin-postrender --example phases -- stream.yaml`.

use std::time::Instant;

use ingress_rules::{IngressTarget, LevelName, Origin, ResolvedIngress};
use postrender::render::RenderRules;
use postrender::{documents, streaming, yaml_tree};

fn main() -> anyhow::Result<()> {
    let path = std::env::args()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: phases STREAM.yaml"))?;
    let input = std::fs::read(&path)?;
    let text = std::str::from_utf8(&input)?;
    let rules = RenderRules {
        resolved: ResolvedIngress {
            target: IngressTarget::class("haproxy"),
            origin: Origin::Level(LevelName::Environment),
        },
        kubernetes: None,
        strict: false,
    };
    let t = Instant::now();
    let documents = documents::split(text);
    println!(
        "split:            {:>8.1} ms ({} documents)",
        t.elapsed().as_secs_f64() * 1e3,
        documents.len()
    );
    let t = Instant::now();
    let mut kinds = 0;
    for d in &documents {
        if yaml_tree::top_level_type(&text[d.range.clone()])?
            .kind
            .is_some()
        {
            kinds += 1;
        }
    }
    println!(
        "top-level kind:   {:>8.1} ms ({kinds} with a kind; every document parsed)",
        t.elapsed().as_secs_f64() * 1e3
    );
    let t = Instant::now();
    let rendered = streaming::render_stream(&input[..], &rules, streaming::BLOCK_BYTES)?;
    println!(
        "render:           {:>8.1} ms ({} changed)",
        t.elapsed().as_secs_f64() * 1e3,
        rendered.rendered.changed.len()
    );
    let t = Instant::now();
    let mut out = Vec::with_capacity(input.len());
    rendered.write(&mut out)?;
    println!(
        "write (memory):   {:>8.1} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}
