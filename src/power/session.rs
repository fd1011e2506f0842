//! The daemon's hold on the clocks: restore what an unclean exit left, apply
//! the profile, and put everything back when dropped, on panic, or at the next
//! start if the process was killed.

use std::sync::Mutex;

use super::nvpmodel::ModeContext;
use super::{engage, plan, Board, Discovered, Failure, OnFailure, PowerConfig, PowerError, StateFile};

/// A session's clocks as the panic hook needs them: its state file, root and files.
type Active = (StateFile, std::path::PathBuf, Discovered);

/// Every session holding clocks in this process, by state file (one in the daemon; tests run several).
static ACTIVE: Mutex<Vec<Active>> = Mutex::new(Vec::new());

fn active() -> std::sync::MutexGuard<'static, Vec<Active>> {
    ACTIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sets (or, with `None`, clears) what the panic hook would restore for `state`.
fn register(state: &StateFile, entry: Option<Active>) {
    let mut a = active();
    a.retain(|(s, _, _)| s != state);
    a.extend(entry);
}

fn restore_one((state, root, disc): Active) {
    match state.restore(&root, &disc) {
        Ok(n) => eprintln!("jetdetect: restored {n} clock values"),
        Err(e) => eprintln!("jetdetect: clock restore failed: {e}"),
    }
}

/// Restores the clocks of every active session (used by the panic hook and signal paths).
pub fn restore_active() {
    let taken = std::mem::take(&mut *active());
    taken.into_iter().for_each(restore_one);
}

/// Who applies and restores the `[power]` profile for a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClockControl {
    /// The daemon: applies it at start, restores it on exit, on panic, or at the next start
    /// after a kill ([`PowerSession::start`]).
    #[default]
    Daemon,
    /// The service manager, around the daemon: `jetdetect clocks apply --service` before it and
    /// `jetdetect clocks restore` after it, outside the unit's sandbox, where nvpmodel and the
    /// fan service can write what they need; the daemon writes nothing under `[power] root`
    /// and only reads telemetry ([`PowerSession::observe`]).
    Service,
}

/// Clock control for the lifetime of a run.
pub struct PowerSession {
    /// The board.
    pub board: Board,
    /// Its files.
    pub discovered: Discovered,
    applied: bool,
    state: StateFile,
}

impl PowerSession {
    /// What [`PowerSession::start`] would refuse as a configuration mistake, found without
    /// writing anything: on a Jetson, the nvpmodel mode `[power] nvpmodel` names and the profile
    /// planned against the board's files and modes as they are now (a mode switch changes them,
    /// and `start` plans again after it); elsewhere, the profile planned as `start` plans it.
    /// `jetdetect check` calls it.
    pub fn check(config: &PowerConfig) -> Result<(), PowerError> {
        let discovered = Discovered::scan(&config.root);
        if !Board::detect(&config.root).is_jetson() {
            return plan(config, &discovered, &ModeContext::default()).map(drop);
        }
        super::apply::wanted_mode(config)?;
        plan(config, &discovered, &ModeContext::read(&config.root)).map(drop)
    }

    /// Detects the board, restores a stale state file, and applies the profile inside the
    /// nvpmodel mode ([`super::apply`]). A profile that cannot be planned is always an error; what
    /// the system refuses is an error only with `[power] on_failure = "exit"`.
    pub fn start(config: &PowerConfig) -> Result<PowerSession, PowerError> {
        let board = Board::detect(&config.root);
        log::info!("board: {board}");
        let state = StateFile::new(&config.state_file);
        let keep_going = |e: PowerError| -> Result<(), PowerError> {
            if config.on_failure == OnFailure::Continue {
                log::error!(
                    "[power] profile '{}' not applied: {e}; running with the clocks as they are \
                     ([power] on_failure = \"exit\" makes this fatal)",
                    config.profile
                );
                Ok(())
            } else {
                Err(e)
            }
        };
        if !board.is_jetson() {
            let discovered = Discovered::scan(&config.root);
            // Checked all the same: a profile that cannot be planned is a configuration mistake.
            let planned = plan(config, &discovered, &ModeContext::default())?;
            if !planned.is_empty() || config.nvpmodel.is_some() {
                log::warn!("[power] profile '{}' ignored: {board}", config.profile);
            }
            return Ok(PowerSession { board, discovered, applied: false, state });
        }
        // Register before applying, so a panic mid-way still restores.
        register(&state, Some((state.clone(), config.root.clone(), Discovered::scan(&config.root))));
        install_panic_hook();
        let engaged = match engage(config, &state) {
            Ok(e) => e,
            Err(failure) => {
                // engage has put back what it changed; nothing is left to restore.
                register(&state, None);
                return match failure {
                    Failure::Config(e) => Err(e),
                    Failure::System(e) => {
                        keep_going(e)?;
                        Ok(PowerSession {
                            board,
                            discovered: Discovered::scan(&config.root),
                            applied: false,
                            state,
                        })
                    }
                };
            }
        };
        match &engaged.stale {
            Some(Ok(n)) => log::warn!(
                "{}: {n} clock values from an unclean exit were still changed: restored them first",
                state.path.display()
            ),
            Some(Err(e)) => log::error!("{e}"),
            None => {}
        }
        let applied = state.exists();
        register(&state, applied.then(|| (state.clone(), config.root.clone(), engaged.discovered.clone())));
        let result = &engaged.applied;
        if let Some(r) = &result.reboot_needed {
            log::warn!("{r}");
        }
        if let Some(m) = &engaged.mode {
            log::info!("[power] nvpmodel mode {}", m.label());
        }
        for unit in &result.stopped {
            log::info!("[power] stopped {unit} while the profile holds (started again on restore)");
        }
        if applied {
            log::info!("[power] profile '{}': {} writes", config.profile, result.written);
        }
        for (p, want, got) in &result.mismatches {
            log::warn!("{}: set to {want} but reads {got}: the setting did not take", p.display());
        }
        Ok(PowerSession { board, discovered: engaged.discovered, applied, state })
    }

    /// The board and its files, for telemetry, when the service manager holds the clocks
    /// ([`ClockControl::Service`]): nothing is written, restored or registered for restore; a
    /// state file left at `[power] state_file` belongs to `clocks apply` and stays.
    pub fn observe(config: &PowerConfig) -> PowerSession {
        let board = Board::detect(&config.root);
        log::info!("board: {board}");
        let state = StateFile::new(&config.state_file);
        if board.is_jetson() {
            if state.exists() {
                log::info!(
                    "[power] profile '{}' applied by the service (`jetdetect clocks apply --service` before this \
                     process, `clocks restore` after it; originals in {})",
                    config.profile,
                    state.path.display()
                );
            } else {
                log::info!(
                    "[power] profile '{}': no clock state in {}: the profile changed nothing, or was not \
                     applied (the journal has `clocks apply`'s reason); clocks as the system set them",
                    config.profile,
                    state.path.display()
                );
            }
        }
        PowerSession { board, discovered: Discovered::scan(&config.root), applied: false, state }
    }

    /// True when the profile was applied (and will be restored).
    pub fn applied(&self) -> bool {
        self.applied
    }
}

impl Drop for PowerSession {
    fn drop(&mut self) {
        if self.applied {
            let mine = {
                let mut a = active();
                a.iter().position(|(s, _, _)| s == &self.state).map(|i| a.remove(i))
            };
            mine.into_iter().for_each(restore_one);
        }
    }
}

fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            restore_active();
        }));
    });
}
