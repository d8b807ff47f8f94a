//! Raw stdio: malformed input gets a JSON-RPC error and the server keeps
//! serving; stdout carries nothing but protocol messages.
//!
//! They test the MCP server (`canopy-mcp`) through the `canopy`
//! binary, so they live in canopy-cli, where Cargo builds it for them.

use std::process::Stdio;
use std::time::Duration;

use canopy_test_support::canopy_bin;
use canopy_test_support::repo::Repo;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{ChildStdin, ChildStdout};

struct Raw {
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Raw {
    async fn send(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).await.expect("write");
        self.stdin.write_all(b"\n").await.expect("write");
        self.stdin.flush().await.expect("flush");
    }

    /// The next stdout line, as JSON (every line must be a JSON-RPC message).
    async fn next(&mut self) -> (String, Value) {
        let line = tokio::time::timeout(Duration::from_secs(60), self.stdout.next_line())
            .await
            .expect("a reply within 60 s")
            .expect("read stdout")
            .expect("stdout open");
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("non-JSON on stdout ({e}): {line}"));
        assert_eq!(value["jsonrpc"], "2.0", "{line}");
        (line, value)
    }

    /// The next reply with this id (notifications in between are skipped).
    async fn reply(&mut self, id: Value) -> (String, Value) {
        loop {
            let (line, value) = self.next().await;
            if value.get("id") == Some(&id) {
                return (line, value);
            }
            assert!(value.get("method").is_some(), "unexpected reply: {line}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_input_gets_errors_and_the_server_keeps_serving() {
    let repo = Repo::fixture();
    let mut child = tokio::process::Command::new(canopy_bin!())
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn canopy mcp");
    let mut raw = Raw {
        stdin: child.stdin.take().expect("stdin"),
        stdout: BufReader::new(child.stdout.take().expect("stdout")).lines(),
    };

    // Garbage before the handshake.
    raw.send("{this is not json").await;
    let (_, parse) = raw.reply(Value::Null).await;
    assert_eq!(parse["error"]["code"], -32700, "{parse}");

    // A notification before `initialize` is dropped, not fatal.
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;
    raw.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "0"}}})
        .to_string(),
    )
    .await;
    let (_, init) = raw.reply(json!(1)).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
    assert_eq!(init["result"]["serverInfo"]["name"], "canopy");
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;

    raw.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#)
        .await;
    let (wire, list) = raw.reply(json!(2)).await;
    assert_eq!(list["result"]["tools"].as_array().map(Vec::len), Some(10));
    let tokens = canopy_core::tokens::count_tokens(&wire);
    println!(
        "tools/list on the wire: {tokens} tokens, {} bytes",
        wire.len()
    );
    assert!(tokens <= 3_000, "tools/list costs {tokens} tokens");

    // tools/call whose params are not an object (5, null, none): Invalid
    // params with its id, never "method not found" (issue 32, U10).
    for (id, params) in [(3, r#","params":5"#), (31, r#","params":null"#), (32, "")] {
        raw.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call"{params}}}"#
        ))
        .await;
        let (_, invalid) = raw.reply(json!(id)).await;
        assert_eq!(invalid["error"]["code"], -32602, "{invalid}");
    }
    // Well-formed JSON that is not a valid request: Invalid Request, with its id.
    raw.send(r#"{"jsonrpc":"2.0","id":33,"method":7}"#).await;
    let (_, invalid) = raw.reply(json!(33)).await;
    assert_eq!(invalid["error"]["code"], -32600, "{invalid}");

    // More garbage, a truncated message, a batch array; then a valid call.
    raw.send("not json at all").await;
    let (_, e) = raw.reply(Value::Null).await;
    assert_eq!(e["error"]["code"], -32700);
    raw.send(r#"{"jsonrpc":"2.0","id":4,"method":"tools/ca"#)
        .await;
    let (_, e) = raw.reply(Value::Null).await;
    assert_eq!(e["error"]["code"], -32700);
    raw.send("[]").await;
    let (_, e) = raw.reply(Value::Null).await;
    assert_eq!(e["error"]["code"], -32600);
    raw.send("").await;

    raw.send(
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "canopy_query", "arguments": {"path": repo.path(), "symbol": "load_settings"}}})
        .to_string(),
    )
    .await;
    let (_, ok) = raw.reply(json!(5)).await;
    assert_eq!(ok["result"]["isError"], false, "{ok}");
    let text = ok["result"]["content"][0]["text"].as_str().expect("text");
    assert!(text.contains("app/service.py"), "{text}");

    // An unknown method is a JSON-RPC error, not a crash.
    raw.send(r#"{"jsonrpc":"2.0","id":6,"method":"canopy/unknown"}"#)
        .await;
    let (_, unknown) = raw.reply(json!(6)).await;
    assert!(unknown["error"]["code"].is_i64(), "{unknown}");

    raw.send(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#)
        .await;
    let (_, pong) = raw.reply(json!(7)).await;
    assert!(pong["result"].is_object(), "{pong}");

    // Closing stdin ends the server cleanly.
    drop(raw);
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("exit after stdin closes")
        .expect("wait");
    assert!(status.success(), "{status}");
}
