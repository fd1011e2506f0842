//! Applying a profile, the whole sequence, shared by the daemon
//! ([`super::PowerSession`]) and `jetdetect clocks apply`:
//!
//! 1. a state file left by a run that did not stop cleanly is restored first
//!    (what cannot be restored stays recorded, and its originals are kept);
//! 2. a rail-gated GPU with no devfreq node is powered up once so that it
//!    registers, then its railgate setting is put back (jetson_clocks R35/R36);
//! 3. an `[power] nvpmodel` mode is switched to (its original recorded first),
//!    and the board is discovered again: the mode changes online cores and
//!    ceilings, so nothing planned before it holds;
//! 4. the profile is planned inside the mode, the originals saved, services
//!    paused, the files written and read back.
//!
//! Any failure after the first change puts back what was changed.

use std::path::{Path, PathBuf};

use super::discover::Discovered;
use super::nvpmodel::{Mode, ModeContext, Nvpmodel};
use super::profile::{plan, Kind, Plan, PowerConfig};
use super::service::{self, Systemctl};
use super::state::StateFile;
use super::{read_value, same_value, write_value, PowerError, NVPMODEL_KEY};

/// What applying a profile did.
#[derive(Debug, Default)]
pub struct Applied {
    /// Files written.
    pub written: usize,
    /// Services paused.
    pub stopped: Vec<String>,
    /// `(path, wanted, got)` for settings that did not take.
    pub mismatches: Vec<(PathBuf, String, String)>,
    /// Set when the nvpmodel switch needs a reboot to take full effect.
    pub reboot_needed: Option<String>,
}

/// Applies `plan`: records the original of every setting it changes in `state` (merged with what
/// an earlier run left there, whose values are the true originals), pauses its services, writes
/// its files in order and reads the settings back. On a refused write everything is put back.
pub fn apply(root: &Path, disc: &Discovered, plan: &Plan, state: &StateFile) -> Result<Applied, PowerError> {
    let mut originals: Vec<(PathBuf, String)> = Vec::new();
    let systemctl = match plan.stop_services.first() {
        Some(unit) => Some(Systemctl::require(root, unit)?),
        None => None,
    };
    for unit in &plan.stop_services {
        let active = systemctl.as_ref().expect("found above").is_active(unit)?;
        originals.push((
            PathBuf::from(format!("{}{unit}", service::KEY_PREFIX)),
            if active { "active" } else { "inactive" }.into(),
        ));
    }
    for w in plan.writes.iter().filter(|w| w.kind == Kind::Static) {
        if !originals.iter().any(|(p, _)| p == &w.path) {
            originals.push((w.path.clone(), read_value(&w.path)?));
        }
    }
    if originals.is_empty() && plan.writes.is_empty() {
        return Ok(Applied::default());
    }
    state.record(root, &originals)?;
    let undo = |e: PowerError| -> PowerError {
        if let Err(r) = state.restore(root, disc) {
            log::error!("putting the clocks back after a failed apply: {r}");
        }
        e
    };
    let mut applied = Applied::default();
    for unit in &plan.stop_services {
        systemctl.as_ref().expect("found above").set_running(unit, false).map_err(undo)?;
        applied.stopped.push(unit.clone());
    }
    let allowed = disc.writable();
    for w in &plan.writes {
        write_value(&allowed, &w.path, &w.value).map_err(undo)?;
        applied.written += 1;
    }
    // The last write to each setting is the value it must hold now; readings are not checked.
    let mut finals: Vec<(&PathBuf, &str)> = Vec::new();
    for w in plan.writes.iter().rev().filter(|w| w.kind == Kind::Static) {
        if !finals.iter().any(|(p, _)| *p == &w.path) {
            finals.push((&w.path, &w.value));
        }
    }
    for (p, want) in finals.into_iter().rev() {
        let got = read_value(p)?;
        if !same_value(&got, want) {
            applied.mismatches.push((p.clone(), want.to_string(), got));
        }
    }
    Ok(applied)
}

/// Powers up a rail-gated GPU whose devfreq node is not registered yet, scans again, and puts
/// the railgate setting back, as jetson_clocks R35/R36 do ("the GPU needs to be powered up once
/// to register with DEVFREQ"). Returns the new discovery (unchanged when there was nothing to do).
pub fn power_up_gpu(root: &Path, disc: Discovered) -> Result<Discovered, PowerError> {
    let Some(railgate) = disc.gpu_unregistered.clone() else { return Ok(disc) };
    let allowed = disc.writable();
    let original = read_value(&railgate)?;
    write_value(&allowed, &railgate, "0")?;
    let again = Discovered::scan(root);
    write_value(&allowed, &railgate, &original)?;
    match &again.gpu {
        Some(g) => log::info!(
            "the GPU was rail-gated with no devfreq node: powered it up once, found {}",
            g.dir.display()
        ),
        None => log::warn!(
            "{}: the GPU has no devfreq node even when powered: GPU clocks cannot be set",
            railgate.display()
        ),
    }
    Ok(again)
}

/// Why [`engage`] failed: the configuration (always fatal) or the system (a refused write, a full
/// state directory: `[power] on_failure` decides).
#[derive(Debug)]
pub enum Failure {
    /// The profile or mode cannot be planned on this board: a configuration mistake.
    Config(PowerError),
    /// The system refused; what was changed has been put back.
    System(PowerError),
}

impl Failure {
    /// The underlying error.
    pub fn error(&self) -> &PowerError {
        match self {
            Failure::Config(e) | Failure::System(e) => e,
        }
    }
}

/// What [`engage`] did.
#[derive(Debug, Default)]
pub struct Engaged {
    /// The board's files as they are now (after a GPU power-up or mode switch); restore with these.
    pub discovered: Discovered,
    /// The writes.
    pub applied: Applied,
    /// The nvpmodel mode switched to.
    pub mode: Option<Mode>,
    /// What was planned (and, without an error, done).
    pub plan: Plan,
    /// Values an earlier run left changed: how many were restored first, or why not.
    pub stale: Option<Result<usize, PowerError>>,
}

/// The board's nvpmodel and the mode `[power] nvpmodel` names in it, when it names one.
pub fn wanted_mode(config: &PowerConfig) -> Result<Option<(Nvpmodel, Mode)>, PowerError> {
    let Some(wanted) = &config.nvpmodel else { return Ok(None) };
    let nv = Nvpmodel::find(&config.root).ok_or_else(|| {
        PowerError(format!(
            "[power] nvpmodel = '{wanted}': nvpmodel is not installed under {}",
            config.root.display()
        ))
    })?;
    let mode = nv.resolve(wanted)?;
    Ok(Some((nv, mode)))
}

/// Runs the whole sequence (module docs) for `config` under its root.
pub fn engage(config: &PowerConfig, state: &StateFile) -> Result<Engaged, Failure> {
    let root = &config.root;
    let mut out = Engaged { discovered: Discovered::scan(root), ..Engaged::default() };
    if state.exists() {
        out.stale = Some(state.restore(root, &out.discovered));
    }
    let nv = wanted_mode(config).map_err(Failure::Config)?;
    out.discovered = power_up_gpu(root, std::mem::take(&mut out.discovered)).map_err(Failure::System)?;
    let mut switched = false;
    if let Some((nv, mode)) = &nv {
        let current = nv.current().map_err(Failure::System)?;
        if current != mode.id {
            state
                .record(root, &[(PathBuf::from(NVPMODEL_KEY), current.to_string())])
                .map_err(Failure::System)?;
            switched = true;
            match nv.set(mode.id) {
                Ok(true) => {
                    out.applied.reboot_needed =
                        Some(format!("nvpmodel mode {} takes full effect only after a reboot", mode.label()))
                }
                Ok(false) => {}
                Err(e) => {
                    let _ = state.restore(root, &out.discovered);
                    return Err(Failure::System(e));
                }
            }
            // The mode changed the online cores and the ceilings: discover and plan again.
            out.discovered = power_up_gpu(root, Discovered::scan(root)).map_err(Failure::System)?;
        }
        out.mode = Some(mode.clone());
    }
    let modes = ModeContext::read(root);
    let planned = match plan(config, &out.discovered, &modes) {
        Ok(p) => p,
        Err(e) => {
            if switched {
                let _ = state.restore(root, &out.discovered);
            }
            return Err(Failure::Config(e));
        }
    };
    let reboot = out.applied.reboot_needed.take();
    out.applied = apply(root, &out.discovered, &planned, state).map_err(Failure::System)?;
    out.applied.reboot_needed = reboot;
    out.plan = planned;
    Ok(out)
}
