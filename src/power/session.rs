//! The daemon's hold on the clocks: restore what an unclean exit left, apply
//! the profile, and put everything back when dropped, on panic, or at the next
//! start if the process was killed.

use std::sync::Mutex;

use super::nvpmodel::Nvpmodel;
use super::{apply_with_mode, plan, Board, Discovered, PowerConfig, PowerError, StateFile};

/// What the panic hook needs to restore clocks.
static ACTIVE: Mutex<Option<(StateFile, std::path::PathBuf, Discovered)>> = Mutex::new(None);

/// Restores the clocks recorded by an active session (used by the panic hook and signal paths).
pub fn restore_active() {
    let taken = ACTIVE.lock().map(|mut a| a.take()).unwrap_or(None);
    if let Some((state, root, disc)) = taken {
        match state.restore(&root, &disc) {
            Ok(n) => eprintln!("jetdetect: restored {n} clock values"),
            Err(e) => eprintln!("jetdetect: clock restore failed: {e}"),
        }
    }
}

/// Clock control for the lifetime of a run.
pub struct PowerSession {
    /// The board.
    pub board: Board,
    /// Its files.
    pub discovered: Discovered,
    applied: bool,
}

impl PowerSession {
    /// Detects the board, restores a stale state file, and applies the profile.
    pub fn start(config: &PowerConfig) -> Result<PowerSession, PowerError> {
        let board = Board::detect(&config.root);
        let discovered = Discovered::scan(&config.root);
        log::info!("board: {board}");
        let state = StateFile::new(&config.state_file);
        // Checked before anything is touched: a profile or mode that cannot be planned is a
        // configuration mistake, and always an error.
        let writes = plan(config, &discovered)?;
        let nv = match &config.nvpmodel {
            Some(wanted) => {
                let nv = Nvpmodel::find(&config.root).ok_or_else(|| {
                    PowerError(format!(
                        "[power] nvpmodel = '{wanted}': nvpmodel is not installed on this system"
                    ))
                })?;
                let mode = nv.resolve(wanted)?;
                Some((nv, mode))
            }
            None => None,
        };
        let mut session = PowerSession { board, discovered, applied: false };
        // From here on the system may refuse (a busy or read-only clock file, a full or
        // read-only state directory): `on_failure` decides whether to run on unpinned.
        let keep_going = |e: PowerError| -> Result<(), PowerError> {
            if config.on_failure == "continue" {
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
        if state.exists() {
            log::warn!(
                "{}: clocks from an unclean exit are still changed: restoring them first",
                state.path.display()
            );
            match state.restore(&config.root, &session.discovered) {
                Ok(n) => log::info!("restored {n} clock values"),
                Err(e) => {
                    keep_going(e)?;
                    return Ok(session);
                }
            }
        }
        if writes.is_empty() && nv.is_none() {
            return Ok(session);
        }
        if !session.board.is_jetson() {
            log::warn!("[power] profile '{}' ignored: {}", config.profile, session.board);
            return Ok(session);
        }
        // Register before applying, so a panic mid-way still restores.
        *ACTIVE.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((state.clone(), config.root.clone(), session.discovered.clone()));
        install_panic_hook();
        let result = match apply_with_mode(
            &config.root,
            &session.discovered,
            nv.as_ref().map(|(n, m)| (n, m.clone())),
            &writes,
            &state,
        ) {
            Ok(r) => r,
            Err(e) => {
                // apply_with_mode has undone its writes; nothing is left to restore.
                *ACTIVE.lock().unwrap_or_else(|e| e.into_inner()) = None;
                keep_going(e)?;
                return Ok(session);
            }
        };
        if let Some(r) = &result.reboot_needed {
            log::warn!("{r}");
        }
        session.applied = true;
        log::info!("[power] profile '{}': {} writes", config.profile, result.written);
        for (p, want, got) in &result.mismatches {
            log::warn!(
                "{}: set to {want} but reads {got}: the setting did not take (capped by nvpmodel?)",
                p.display()
            );
        }
        Ok(session)
    }

    /// True when the profile was applied (and will be restored).
    pub fn applied(&self) -> bool {
        self.applied
    }
}

impl Drop for PowerSession {
    fn drop(&mut self) {
        if self.applied {
            restore_active();
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
