//! `canopy setup <client>`: registers `canopy mcp` in an agent's MCP
//! configuration, in the file and format that client documents.
//!
//! The edit is one entry under the client's server table: other servers and
//! unrelated keys stay as they were (JSON keys keep their order; TOML keeps
//! its comments and layout). Running it again changes nothing; a file that
//! does not parse is reported, never overwritten.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Serialize;
use serde_json::{Map, Value, json};

/// The name the server is registered under.
const SERVER_NAME: &str = "canopy";

/// `canopy setup` arguments.
#[derive(clap::Args, Debug)]
pub struct SetupArgs {
    /// The agent to register Canopy with.
    #[arg(value_enum)]
    client: Client,
    /// Where the entry goes: `project` (a file in the repository, shared
    /// through version control) or `user` (your home folder, every project).
    /// Default: project, except for codex (user: Codex reads a project's file
    /// only in a trusted project).
    #[arg(long, value_enum)]
    scope: Option<Scope>,
    /// Print the change and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// The command the client runs (default: `canopy` when it is on PATH
    /// for a project file, which others share, else this binary's absolute path).
    #[arg(long)]
    command: Option<String>,
}

/// The MCP clients `canopy setup` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Client {
    /// Claude Code: `.mcp.json` (project) or `~/.claude.json` (user), key `mcpServers`.
    ClaudeCode,
    /// Cursor: `.cursor/mcp.json` or `~/.cursor/mcp.json`, key `mcpServers`.
    Cursor,
    /// Codex CLI: `~/.codex/config.toml` (user) or `.codex/config.toml`, table `[mcp_servers.canopy]`.
    Codex,
    /// VS Code: `.vscode/mcp.json` or the user profile's `mcp.json`, key `servers`.
    Vscode,
}

/// Project or user configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// A file in the repository.
    Project,
    /// A file in the home folder.
    User,
}

/// What `setup` did (or, with `--dry-run`, would do) to the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Action {
    /// The file did not exist.
    Created,
    /// The file existed without Canopy's entry, or with another one.
    Updated,
    /// The entry was already there, as it would be written.
    Unchanged,
}

/// The report `setup` prints.
#[derive(Debug, Serialize)]
struct Report {
    client: Client,
    scope: Scope,
    path: PathBuf,
    action: Action,
    dry_run: bool,
    /// The entry as it appears in the file.
    entry: String,
    /// The same registration through `claude mcp add` (Claude Code only).
    #[serde(skip_serializing_if = "Option::is_none")]
    claude_command: Option<String>,
}

/// Runs `canopy setup`: `start` is the directory a project file belongs to
/// (its repository's root is found from there).
pub fn run(args: SetupArgs, start: Option<&Path>, json: bool) -> anyhow::Result<()> {
    let scope = args.scope.unwrap_or(match args.client {
        Client::Codex => Scope::User,
        _ => Scope::Project,
    });
    let path = config_path(args.client, scope, start)?;
    let command = match args.command {
        Some(command) => command,
        None => default_command(scope)?,
    };
    let server_args = vec!["mcp".to_string()];
    let existing = match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let edit = match args.client {
        Client::Codex => edit_toml(existing.as_deref(), &command, &server_args),
        client => edit_json(client, existing.as_deref(), &command, &server_args),
    }
    .with_context(|| format!("{} is left as it was", path.display()))?;
    let action = match (&existing, &edit.text) {
        (None, _) => Action::Created,
        (Some(_), None) => Action::Unchanged,
        (Some(_), Some(_)) => Action::Updated,
    };
    if !args.dry_run
        && let Some(text) = &edit.text
    {
        write_atomically(&path, text)?;
    }
    let claude_command = (args.client == Client::ClaudeCode).then(|| {
        let scope = match scope {
            Scope::Project => "project",
            Scope::User => "user",
        };
        format!(
            "claude mcp add --scope {scope} {SERVER_NAME} -- {} {}",
            shell_word(&command),
            server_args.join(" ")
        )
    });
    let report = Report {
        client: args.client,
        scope,
        path,
        action,
        dry_run: args.dry_run,
        entry: edit.entry,
        claude_command,
    };
    print_report(&report, json)
}

fn print_report(report: &Report, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(report)?);
        return Ok(());
    }
    let path = report.path.display();
    let verb = match (report.action, report.dry_run) {
        (Action::Unchanged, _) => format!("{path} already registers canopy; nothing to change"),
        (Action::Created, true) => format!("would create {path} with:"),
        (Action::Updated, true) => format!("would add to {path}:"),
        (Action::Created, false) => format!("created {path} with:"),
        (Action::Updated, false) => format!("updated {path}:"),
    };
    println!("{verb}");
    if report.action != Action::Unchanged {
        for line in report.entry.lines() {
            println!("  {line}");
        }
    }
    if let Some(line) = &report.claude_command {
        println!("the same with Claude Code's own command:\n  {line}");
    }
    if !report.dry_run && report.action != Action::Unchanged {
        println!("restart the client (or reload its MCP servers) to pick it up");
    }
    Ok(())
}

/// The client's documented configuration file for a scope.
fn config_path(client: Client, scope: Scope, start: Option<&Path>) -> anyhow::Result<PathBuf> {
    match scope {
        Scope::Project => {
            let root = project_root(start)?;
            Ok(match client {
                Client::ClaudeCode => root.join(".mcp.json"),
                Client::Cursor => root.join(".cursor").join("mcp.json"),
                Client::Codex => root.join(".codex").join("config.toml"),
                Client::Vscode => root.join(".vscode").join("mcp.json"),
            })
        }
        Scope::User => {
            let home = home()?;
            Ok(match client {
                Client::ClaudeCode => home.join(".claude.json"),
                Client::Cursor => home.join(".cursor").join("mcp.json"),
                Client::Codex => match std::env::var_os("CODEX_HOME") {
                    Some(dir) if !dir.is_empty() => PathBuf::from(dir).join("config.toml"),
                    _ => home.join(".codex").join("config.toml"),
                },
                Client::Vscode => vscode_user_dir(&home).join("mcp.json"),
            })
        }
    }
}

fn home() -> anyhow::Result<PathBuf> {
    match std::env::var_os("HOME") {
        Some(home) if !home.is_empty() => Ok(PathBuf::from(home)),
        _ => bail!("HOME is not set: cannot find the user configuration (use --scope project)"),
    }
}

/// VS Code's user profile folder.
fn vscode_user_dir(home: &Path) -> PathBuf {
    if cfg!(target_os = "macos") {
        return home.join("Library/Application Support/Code/User");
    }
    let config = match std::env::var_os("XDG_CONFIG_HOME") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => home.join(".config"),
    };
    config.join("Code").join("User")
}

/// The repository containing `start` (or the current directory): the
/// nearest folder with `.git`, else `start` itself.
fn project_root(start: Option<&Path>) -> anyhow::Result<PathBuf> {
    let start = match start {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir().context("reading the current directory")?,
    };
    let start = start
        .canonicalize()
        .with_context(|| format!("{} is not a directory", start.display()))?;
    let root = start
        .ancestors()
        .find(|dir| dir.join(".git").exists())
        .unwrap_or(&start);
    Ok(root.to_path_buf())
}

/// `canopy` for a project file when it is on PATH (the file is shared, and
/// an absolute path is one person's), else this binary's absolute path.
fn default_command(scope: Scope) -> anyhow::Result<String> {
    if scope == Scope::Project && on_path("canopy") {
        return Ok("canopy".to_string());
    }
    let exe = std::env::current_exe().context("finding this binary's path")?;
    Ok(exe.to_string_lossy().into_owned())
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// The new text of a file (None: already as wanted) and the entry as shown.
struct Edit {
    text: Option<String>,
    entry: String,
}

/// Sets `<servers key>.canopy` in a JSON configuration, leaving every other
/// key where it was.
fn edit_json(
    client: Client,
    existing: Option<&str>,
    command: &str,
    args: &[String],
) -> anyhow::Result<Edit> {
    let servers_key = match client {
        Client::Vscode => "servers",
        _ => "mcpServers",
    };
    let entry = match client {
        // Cursor's documented entry has no `type`; the others name the transport.
        Client::Cursor => json!({ "command": command, "args": args }),
        _ => json!({ "type": "stdio", "command": command, "args": args }),
    };
    let mut root: Value = match existing {
        None => Value::Object(Map::new()),
        Some(text) if text.trim().is_empty() => Value::Object(Map::new()),
        Some(text) => serde_json::from_str(text).context("the file is not valid JSON")?,
    };
    let Some(object) = root.as_object_mut() else {
        bail!("the file's top level is not a JSON object");
    };
    let servers = object
        .entry(servers_key)
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(servers) = servers.as_object_mut() else {
        bail!("`{servers_key}` is not a JSON object");
    };
    let shown = serde_json::to_string_pretty(&json!({ servers_key: { SERVER_NAME: &entry } }))?;
    if servers.get(SERVER_NAME) == Some(&entry) {
        return Ok(Edit {
            text: None,
            entry: shown,
        });
    }
    servers.insert(SERVER_NAME.to_string(), entry);
    let mut text = serde_json::to_string_pretty(&root)?;
    text.push('\n');
    Ok(Edit {
        text: Some(text),
        entry: shown,
    })
}

/// Sets `[mcp_servers.canopy]` in a Codex `config.toml`, keeping the rest
/// of the document (comments, order, layout) as it was.
fn edit_toml(existing: Option<&str>, command: &str, args: &[String]) -> anyhow::Result<Edit> {
    use toml_edit::{Array, DocumentMut, Item, Table, value};

    let mut doc: DocumentMut = existing
        .unwrap_or("")
        .parse()
        .context("the file is not valid TOML")?;
    let mut wanted_args = Array::new();
    for arg in args {
        wanted_args.push(arg.as_str());
    }
    let shown = format!(
        "[mcp_servers.{SERVER_NAME}]\ncommand = {}\nargs = {}",
        toml_edit::Value::from(command),
        wanted_args
    );
    let servers = doc
        .entry("mcp_servers")
        .or_insert_with(|| {
            let mut table = Table::new();
            // `[mcp_servers.canopy]` without an empty `[mcp_servers]` above it.
            table.set_implicit(true);
            Item::Table(table)
        })
        .as_table_mut()
        .context("`mcp_servers` is not a table")?;
    let same = servers
        .get(SERVER_NAME)
        .and_then(Item::as_table)
        .is_some_and(|t| {
            t.get("command").and_then(Item::as_str) == Some(command)
                && t.get("args").and_then(Item::as_array).is_some_and(|a| {
                    a.iter()
                        .map(|v| v.as_str())
                        .eq(args.iter().map(|s| Some(s.as_str())))
                })
        });
    if same {
        return Ok(Edit {
            text: None,
            entry: shown,
        });
    }
    let entry = servers
        .entry(SERVER_NAME)
        .or_insert_with(|| Item::Table(Table::new()))
        .as_table_mut()
        .with_context(|| format!("`mcp_servers.{SERVER_NAME}` is not a table"))?;
    // Only the two keys Canopy owns change; others a person added (env,
    // timeouts, enabled) stay.
    entry["command"] = value(command);
    entry["args"] = value(wanted_args);
    Ok(Edit {
        text: Some(doc.to_string()),
        entry: shown,
    })
}

/// Writes through a temporary file in the same folder and a rename, so a
/// client reading the file never sees half of it.
fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .context("the configuration file has no parent folder")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = path
        .file_name()
        .context("the configuration path has no file name")?
        .to_string_lossy();
    let tmp = dir.join(format!(".{name}.canopy-setup.tmp"));
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    // Keep the original's permissions (~/.claude.json may hold tokens).
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&tmp, meta.permissions());
    }
    std::fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))
}

/// `word` quoted for a POSIX shell when it needs it.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:=@,".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_edit_keeps_comments_and_other_keys() {
        let before =
            "# my settings\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\" # keep\n";
        let args = vec!["mcp".to_string()];
        let edit = edit_toml(Some(before), "/bin/canopy", &args).unwrap();
        let after = edit.text.unwrap();
        assert!(after.starts_with(before), "{after}");
        assert!(after.contains("[mcp_servers.canopy]"), "{after}");
        assert!(!after.contains("[mcp_servers]\n"), "{after}");
        let again = edit_toml(Some(&after), "/bin/canopy", &args).unwrap();
        assert!(again.text.is_none());
    }

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("/usr/bin/canopy"), "/usr/bin/canopy");
        assert_eq!(shell_word("/a b/canopy"), "'/a b/canopy'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
    }
}
