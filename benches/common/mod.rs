//! What the benchmarks share: the synthetic obstacles' classes and a hazard layer over them.

use jetdetect::hazard::{ClassSize, Hazards, HazardsConfig};
use jetdetect::yolo::ClassNames;

/// The synthetic obstacles' class names (`models/obstacles.names`).
pub fn names() -> ClassNames {
    ClassNames::from_metadata("{0: 'box', 1: 'ball', 2: 'cone'}").expect("names")
}

/// The hazard layer on, with the synthetic obstacles' real sizes (as `configs/demo.toml`), so
/// every track also gets a range estimate.
pub fn hazards() -> Hazards {
    let mut config = HazardsConfig { enabled: true, ..Default::default() };
    for (class, h) in [("box", 0.5), ("ball", 0.3), ("cone", 0.7)] {
        config.classes.insert(class.into(), ClassSize { height_m: Some(h), width_m: None });
    }
    Hazards::new(&config, &Default::default(), &names()).expect("hazards")
}
