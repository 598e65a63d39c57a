// SPDX-License-Identifier: MIT OR Apache-2.0
//! cargo run --offline --example basic   (with TICKWHEEL_LIB_DIR set)
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn main() -> Result<(), tickwheel::Error> {
    let (major, minor, patch) = tickwheel::version();
    println!("tickwheel {major}.{minor}.{patch}");
    let rt = tickwheel::Runtime::new()?;
    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    let id = rt.start(Duration::from_millis(5), Duration::from_millis(5), move |id| {
        let _ = tx.send((id, start.elapsed()));
    })?;
    for _ in 0..3 {
        let (id, at) = rx.recv().unwrap();
        println!("{id:?} ran at {at:?}");
    }
    rt.stop_sync(id)?;
    Ok(())
}
