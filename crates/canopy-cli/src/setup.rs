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
    servers.insert(SERVER_NAME.to_string(), entry.clone());
    // The entry spliced into the text as it is, so every other byte of the
    // file stays where it was; the splice must parse to exactly the edited
    // document, or the document is written out whole.
    let spliced = existing
        .and_then(|text| splice_json(text, servers_key, &entry))
        .filter(|text| serde_json::from_str::<Value>(text).ok().as_ref() == Some(&root));
    let text = match spliced {
        Some(text) => text,
        None => {
            let mut text = serde_json::to_string_pretty(&root)?;
            text.push('\n');
            text
        }
    };
    Ok(Edit {
        text: Some(text),
        entry: shown,
    })
}

/// A JSON object's members in `text`, from the byte after its `{`: each
/// key (unescaped only when plain) with the byte ranges of the key's quote
/// and of its value; and the byte of the closing `}`.
struct Members {
    members: Vec<(String, usize, std::ops::Range<usize>)>,
    close: usize,
}

fn skip_ws(bytes: &[u8], mut at: usize) -> usize {
    while at < bytes.len() && bytes[at].is_ascii_whitespace() {
        at += 1;
    }
    at
}

/// The end (exclusive) of the string starting at `at` (a `"`).
fn string_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    at += 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'"' => return Some(at + 1),
            _ => at += 1,
        }
    }
    None
}

/// The end (exclusive) of the JSON value starting at `at`.
fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match *bytes.get(at)? {
        b'"' => string_end(bytes, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            while i < bytes.len() {
                match bytes[i] {
                    b'"' => {
                        i = string_end(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let mut i = at;
            while i < bytes.len() && !matches!(bytes[i], b',' | b'}' | b']') {
                i += 1;
            }
            Some(i)
        }
    }
}

fn members(text: &str, open: usize) -> Option<Members> {
    let bytes = text.as_bytes();
    let mut members = Vec::new();
    let mut at = skip_ws(bytes, open + 1);
    if bytes.get(at) == Some(&b'}') {
        return Some(Members { members, close: at });
    }
    loop {
        let key_start = at;
        let key_end = string_end(bytes, key_start)?;
        let key: String = serde_json::from_str(&text[key_start..key_end]).ok()?;
        at = skip_ws(bytes, key_end);
        (bytes.get(at) == Some(&b':')).then_some(())?;
        let value_start = skip_ws(bytes, at + 1);
        let end = value_end(bytes, value_start)?;
        members.push((key, key_start, value_start..end));
        at = skip_ws(bytes, end);
        match bytes.get(at)? {
            b',' => at = skip_ws(bytes, at + 1),
            b'}' => return Some(Members { members, close: at }),
            _ => return None,
        }
    }
}

/// The indentation of the line holding byte `at`.
fn indent_at(text: &str, at: usize) -> &str {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = &text[line_start..at];
    &line[..line.len() - line.trim_start().len()]
}

/// `text` with `servers_key.canopy` set to `entry` by a splice (None when
/// the text is not shaped as expected).
fn splice_json(text: &str, servers_key: &str, entry: &Value) -> Option<String> {
    let bytes = text.as_bytes();
    let open = skip_ws(bytes, 0);
    (bytes.get(open) == Some(&b'{')).then_some(())?;
    let top = members(text, open)?;
    let render = |value: &Value, indent: &str| -> Option<String> {
        let pretty = serde_json::to_string_pretty(value).ok()?;
        Some(pretty.replace('\n', &format!("\n{indent}")))
    };
    let key_json = |key: &str| serde_json::to_string(key).ok();
    // Insert `"key": value` as an object's first member (or its only one).
    let insert_first = |object: &Members, open: usize, key: &str, value: &Value| {
        let mut out = String::with_capacity(text.len() + 256);
        match object.members.first() {
            Some((_, first, _)) => {
                let indent = indent_at(text, *first);
                out.push_str(&text[..*first]);
                out.push_str(&format!(
                    "{}: {},\n{indent}",
                    key_json(key)?,
                    render(value, indent)?
                ));
                out.push_str(&text[*first..]);
            }
            None => {
                let outer = indent_at(text, open);
                let indent = format!("{outer}  ");
                out.push_str(&text[..open]);
                out.push_str(&format!(
                    "{{\n{indent}{}: {}\n{outer}}}",
                    key_json(key)?,
                    render(value, &indent)?
                ));
                out.push_str(&text[object.close + 1..]);
            }
        }
        Some(out)
    };
    let Some((_, _, servers)) = top.members.iter().find(|(k, _, _)| k == servers_key) else {
        let mut wrapped = Map::new();
        wrapped.insert(SERVER_NAME.to_string(), entry.clone());
        return insert_first(&top, open, servers_key, &Value::Object(wrapped));
    };
    (bytes.get(servers.start) == Some(&b'{')).then_some(())?;
    let inner = members(text, servers.start)?;
    match inner.members.iter().find(|(k, _, _)| k == SERVER_NAME) {
        Some((_, key_at, value)) => {
            let indent = indent_at(text, *key_at);
            Some(format!(
                "{}{}{}",
                &text[..value.start],
                render(entry, indent)?,
                &text[value.end..]
            ))
        }
        None => insert_first(&inner, servers.start, SERVER_NAME, entry),
    }
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
    fn json_edits_keep_every_other_byte() {
        let args = vec!["mcp".to_string()];
        let before = "{\n    \"zz\": 1,\n    \"mcpServers\": {\n        \"other\": {\"command\": \"x\"}\n    },\n    \"aa\": [\"}\", \"\\\"\"]\n}\n";
        let after = edit_json(Client::Cursor, Some(before), "/bin/canopy", &args)
            .unwrap()
            .text
            .unwrap();
        // Everything before the other server and from it on is as it was;
        // between them, the new member (its keys in serde_json's map order).
        let at = before.find("\"other\"").unwrap();
        assert!(after.starts_with(&before[..at]), "{after}");
        assert!(after.ends_with(&before[at..]), "{after}");
        let inserted = &after[at..after.len() - (before.len() - at)];
        let member: Value = serde_json::from_str(&format!(
            "{{{}}}",
            inserted.trim_end().trim_end_matches(',')
        ))
        .unwrap();
        assert_eq!(
            member,
            json!({"canopy": {"command": "/bin/canopy", "args": ["mcp"]}})
        );
        // No servers yet, an empty file's object, an entry to update.
        for (before, key) in [
            ("{\"theme\": \"dark\"}", "mcpServers"),
            ("{}", "servers"),
            (
                "{\"servers\": {\"canopy\": {\"command\": \"old\"}, \"b\": 2}}",
                "servers",
            ),
        ] {
            let client = if key == "servers" {
                Client::Vscode
            } else {
                Client::ClaudeCode
            };
            let after = edit_json(client, Some(before), "/bin/canopy", &args)
                .unwrap()
                .text
                .unwrap();
            let value: Value = serde_json::from_str(&after).unwrap();
            assert_eq!(value[key]["canopy"]["command"], "/bin/canopy", "{after}");
            assert_eq!(
                splice_json(before, key, &value[key]["canopy"]).as_deref(),
                Some(after.as_str())
            );
        }
    }

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("/usr/bin/canopy"), "/usr/bin/canopy");
        assert_eq!(shell_word("/a b/canopy"), "'/a b/canopy'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
    }
}
