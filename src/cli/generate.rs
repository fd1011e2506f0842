//! `jetdetect generate`: the man pages and the shell completions, written from the same clap
//! definitions that parse the command line, so they cannot drift from it. The Debian package
//! runs it at build time (`cross/deb.sh`); anyone installing the bare binary can run it too.

use std::path::{Path, PathBuf};

use clap_complete::Shell;
use clap_mangen::roff::{bold, italic, roman, Roff};
use clap_mangen::Man;
use jetdetect::Error;

/// `jetdetect generate`.
#[derive(clap::Args)]
pub struct Args {
    /// What to write: `man` (jetdetect.1 and one page per command), or the completion
    /// script for `bash`, `zsh` or `fish`.
    what: What,
    /// Folder to write into (created if missing). Debian's places: man: /usr/share/man/man1
    /// (gzip them), bash: /usr/share/bash-completion/completions, zsh:
    /// /usr/share/zsh/vendor-completions, fish: /usr/share/fish/vendor_completions.d.
    #[arg(long, short)]
    out: PathBuf,
}

/// What `jetdetect generate` writes.
#[derive(Clone, Copy, clap::ValueEnum)]
enum What {
    /// Manual pages, section 1.
    Man,
    /// bash completion (file `jetdetect`).
    Bash,
    /// zsh completion (file `_jetdetect`).
    Zsh,
    /// fish completion (file `jetdetect.fish`).
    Fish,
}

/// Writes what `args` asks for, from `cli` (the top-level command), and names each file.
pub fn run(args: Args, mut cli: clap::Command) -> Result<bool, Error> {
    let out = &args.out;
    std::fs::create_dir_all(out)
        .map_err(|e| Error::io(format!("cannot create the folder {}", out.display()), e))?;
    let written = match args.what {
        What::Man => man_pages(cli, out)?,
        What::Bash | What::Zsh | What::Fish => {
            // The names the shells look up in their completion folders.
            let (shell, file) = match args.what {
                What::Bash => (Shell::Bash, "jetdetect"),
                What::Zsh => (Shell::Zsh, "_jetdetect"),
                _ => (Shell::Fish, "jetdetect.fish"),
            };
            let mut script = Vec::new();
            let name = cli.get_name().to_string();
            clap_complete::generate(shell, &mut cli, name, &mut script);
            vec![write(out, file, &script)?]
        }
    };
    for p in written {
        println!("{}", p.display());
    }
    Ok(true)
}

/// `jetdetect.1` with the sections a daemon's page needs (files, environment, exit status),
/// and `jetdetect-COMMAND.1` (`jetdetect-clocks-apply.1`) for every command that is shown.
fn man_pages(cli: clap::Command, out: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut cli = cli.disable_help_subcommand(true);
    cli.build();
    let version = cli.get_version().unwrap_or_default().to_string();
    let mut written = Vec::new();
    let mut page = Vec::new();
    let man = man(&cli, &version);
    man.render_title(&mut page).map_err(io)?;
    man.render_name_section(&mut page).map_err(io)?;
    man.render_synopsis_section(&mut page).map_err(io)?;
    man.render_description_section(&mut page).map_err(io)?;
    man.render_options_section(&mut page).map_err(io)?;
    man.render_subcommands_section(&mut page).map_err(io)?;
    main_sections().to_writer(&mut page).map_err(io)?;
    see_also(&cli, true).to_writer(&mut page).map_err(io)?;
    written.push(write(out, &man.get_filename(), &page)?);
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        sub_pages(sub, &version, out, &mut written)?;
    }
    Ok(written)
}

/// One page for `cmd` and one for each of its own commands.
fn sub_pages(
    cmd: &clap::Command,
    version: &str,
    out: &Path,
    written: &mut Vec<PathBuf>,
) -> Result<(), Error> {
    let man = man(cmd, version);
    let mut page = Vec::new();
    man.render(&mut page).map_err(io)?;
    see_also(cmd, false).to_writer(&mut page).map_err(io)?;
    written.push(write(out, &man.get_filename(), &page)?);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        sub_pages(sub, version, out, written)?;
    }
    Ok(())
}

/// The page writer for `cmd`, with the manual's name and the version in its header.
fn man(cmd: &clap::Command, version: &str) -> Man {
    Man::new(cmd.clone()).manual("jetdetect manual").source(format!("jetdetect {version}"))
}

/// Rendering into memory fails only as a writer can.
fn io(e: std::io::Error) -> Error {
    Error::io("cannot render a manual page", e)
}

fn write(out: &Path, name: &str, page: &[u8]) -> Result<PathBuf, Error> {
    let path = out.join(name);
    std::fs::write(&path, page).map_err(|e| Error::io(format!("cannot write {}", path.display()), e))?;
    Ok(path)
}

/// FILES, ENVIRONMENT and EXIT STATUS of `jetdetect(1)`: where the package puts things.
fn main_sections() -> Roff {
    let mut r = Roff::default();
    r.control("SH", ["FILES"]);
    for (path, what) in [
        ("/etc/jetdetect/jetdetect.toml", "The service's configuration; every key is documented in it. Check it with jetdetect check --config FILE."),
        ("/run/jetdetect/detections.sock", "The UNIX socket on which every frame's detections are published, one JSON line each (jetdetect watch reads it)."),
        ("/var/lib/jetdetect/clocks.state", "The clocks as they were before a [power] profile was applied; jetdetect clocks restore puts them back."),
        ("/var/cache/jetdetect/", "TensorRT engines and timing caches, named after the model and the library versions."),
        ("/usr/share/jetdetect/models/", "The demo models (YOLOv8 and YOLOv5 layouts) and their class names."),
        ("/usr/share/doc/jetdetect/", "The documentation: deploy.md (the service), power.md, protocol.md, accelerators.md and more."),
    ] {
        r.control("TP", []);
        r.text([bold(path)]);
        r.text([roman(what)]);
    }
    r.control("SH", ["ENVIRONMENT"]);
    for (name, what) in [
        (
            "RUST_LOG",
            "Log filter, e.g. debug or info,jetdetect::source=debug (default: info for run, warn otherwise).",
        ),
        ("ORT_DYLIB_PATH", "The ONNX Runtime library to load when the config names none."),
        (
            "NOTIFY_SOCKET, WATCHDOG_USEC",
            "Set by systemd for a Type=notify service: readiness and watchdog pings.",
        ),
    ] {
        r.control("TP", []);
        r.text([bold(name)]);
        r.text([roman(what)]);
    }
    r.control("SH", ["EXIT STATUS"]);
    r.text([roman(
        "0 on success; 1 on an error, which is printed with the file, key or device concerned and what to do; \
         2 on a command-line usage error.",
    )]);
    r
}

/// SEE ALSO: the main page lists every command's page, a command's page the main one and its
/// own commands.
fn see_also(cmd: &clap::Command, main: bool) -> Roff {
    let mut names: Vec<String> = Vec::new();
    if !main {
        names.push("jetdetect".into());
    }
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        names.push(sub.get_display_name().unwrap_or(sub.get_name()).to_string());
    }
    let mut r = Roff::default();
    r.control("SH", ["SEE ALSO"]);
    let mut line = Vec::new();
    for (i, n) in names.iter().enumerate() {
        if i > 0 {
            line.push(roman(", "));
        }
        line.push(bold(n.clone()));
        line.push(roman("(1)"));
    }
    if !line.is_empty() {
        line.push(roman(", "));
    }
    line.push(bold("systemctl"));
    line.push(roman("(1); the documentation in "));
    line.push(italic("/usr/share/doc/jetdetect/"));
    line.push(roman("."));
    r.text(line);
    r
}
