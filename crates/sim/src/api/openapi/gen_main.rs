//! Writes the OpenAPI documents the sim serves into `src/api/openapi/` (see `generate.rs`).
//! Run: `cargo run -p podline-sim --features openapi-gen --bin podline-sim-openapi-gen`.

use std::path::Path;

fn main() -> std::io::Result<()> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/api/openapi");
    for (file, doc) in podline_sim::api::openapi::generate::documents() {
        let mut text = serde_json::to_string_pretty(&doc).map_err(std::io::Error::other)?;
        text.push('\n');
        std::fs::write(dir.join(file), text)?;
        println!("wrote {file}");
    }
    Ok(())
}
