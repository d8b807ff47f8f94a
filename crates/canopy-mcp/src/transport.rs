//! The stdio transport: newline-delimited JSON-RPC, answering malformed
//! input itself.
//!
//! rmcp's own stdio transport silently drops lines that are not JSON (to
//! avoid error storms with misbehaving peers) and answers well-formed but
//! invalid messages with an id-less `Invalid Request`. JSON-RPC 2.0 asks for
//! a `-32700 Parse error` reply to unparsable input and for the request's id
//! when it can be read, so this transport reads stdin on its own task and:
//!
//! * forwards every valid message to rmcp;
//! * answers a line that is not JSON with `-32700` (id `null`);
//! * answers well-formed JSON that is not a valid message with `-32600`,
//!   echoing its `id` when it has one (notifications and stray responses are
//!   dropped, as JSON-RPC forbids replying to them);
//! * answers an over-long line (more than [`MAX_LINE_BYTES`]) with `-32600`;
//! * drops notifications and responses that arrive before the first request
//!   (rmcp would end the session: it expects `initialize` first);
//!
//! and keeps serving in every case. All writes to stdout go through one lock,
//! one whole line at a time, so error replies never interleave with rmcp's
//! messages.

use std::io;
use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::JsonRpcMessage;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, mpsc};
use tokio::task::JoinHandle;

/// Longest accepted message line (16 MiB, as rmcp's default).
pub(crate) const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// JSON-RPC "Parse error".
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC "Invalid params".
const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC "Invalid Request".
const INVALID_REQUEST: i64 = -32600;

type SharedWriter<W> = Arc<Mutex<Option<W>>>;

/// A server-side [`Transport`] over a byte reader and writer (stdin/stdout).
pub(crate) struct LineTransport<W> {
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleServer>>,
    writer: SharedWriter<W>,
    reader: JoinHandle<()>,
}

impl<W> LineTransport<W>
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// Starts reading `read` on its own task; must be called inside a tokio runtime.
    pub(crate) fn new<R>(read: R, write: W) -> LineTransport<W>
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let writer: SharedWriter<W> = Arc::new(Mutex::new(Some(write)));
        let (tx, incoming) = mpsc::channel(64);
        let reader = tokio::spawn(read_loop(read, writer.clone(), tx));
        LineTransport {
            incoming,
            writer,
            reader,
        }
    }
}

/// Writes one line (a serialized message plus `\n`) and flushes.
async fn write_line<W>(writer: &SharedWriter<W>, mut line: Vec<u8>) -> io::Result<()>
where
    W: AsyncWrite + Unpin + Send,
{
    line.push(b'\n');
    let mut guard = writer.lock().await;
    let Some(w) = guard.as_mut() else {
        return Err(io::Error::new(
            io::ErrorKind::NotConnected,
            "transport is closed",
        ));
    };
    w.write_all(&line).await?;
    w.flush().await
}

impl<W> Transport<RoleServer> for LineTransport<W>
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.writer.clone();
        let line = serde_json::to_vec(&item);
        async move { write_line(&writer, line.map_err(io::Error::from)?).await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        self.incoming.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        if let Some(mut w) = self.writer.lock().await.take() {
            w.shutdown().await?;
        }
        Ok(())
    }
}

/// What one bounded line read produced.
enum Line {
    /// A line (without its `\n`) is in the buffer; the last line may lack the `\n`.
    Complete,
    /// The line exceeded [`MAX_LINE_BYTES`] and was skipped.
    TooLong,
    /// End of input.
    Eof,
}

/// Reads one `\n`-terminated line into `buf` (cleared first), never holding
/// more than [`MAX_LINE_BYTES`].
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    buf: &mut Vec<u8>,
) -> io::Result<Line> {
    buf.clear();
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (too_long, buf.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::Eof,
                (false, false) => Line::Complete,
            });
        }
        let newline = available.iter().position(|&b| b == b'\n');
        let take = newline.map_or(available.len(), |i| i + 1);
        if !too_long {
            if buf.len() + take > MAX_LINE_BYTES + 1 {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&available[..take]);
            }
        }
        reader.consume(take);
        if newline.is_some() {
            if too_long {
                return Ok(Line::TooLong);
            }
            buf.pop();
            return Ok(Line::Complete);
        }
    }
}

/// Reads messages until end of input, forwarding valid ones and answering the rest.
async fn read_loop<R, W>(
    read: R,
    writer: SharedWriter<W>,
    tx: mpsc::Sender<RxJsonRpcMessage<RoleServer>>,
) where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send,
{
    let mut reader = BufReader::new(read);
    let mut buf = Vec::new();
    let mut seen_request = false;
    loop {
        let reply = match read_line(&mut reader, &mut buf).await {
            Ok(Line::Eof) => break,
            Err(e) => {
                tracing::warn!("cannot read stdin: {e}");
                break;
            }
            Ok(Line::TooLong) => Some(error_reply(
                INVALID_REQUEST,
                format!("Invalid Request: message longer than {MAX_LINE_BYTES} bytes"),
                Value::Null,
            )),
            Ok(Line::Complete) => match classify(&buf) {
                Incoming::Message(msg) => {
                    seen_request |= matches!(*msg, JsonRpcMessage::Request(_));
                    if !seen_request {
                        tracing::debug!("dropping a message received before the first request");
                    } else if tx.send(*msg).await.is_err() {
                        break;
                    }
                    None
                }
                Incoming::Blank => None,
                Incoming::Reply(reply) => Some(reply),
            },
        };
        if let Some(reply) = reply
            && let Err(e) = write_line(&writer, reply.to_string().into_bytes()).await
        {
            tracing::warn!("cannot write an error reply: {e}");
            break;
        }
    }
}

/// What to do with one input line.
enum Incoming {
    /// A valid message for rmcp.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Nothing (blank line, or something JSON-RPC forbids answering).
    Blank,
    /// An error reply to write.
    Reply(Value),
}

fn classify(line: &[u8]) -> Incoming {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let line = line.trim_ascii();
    if line.is_empty() {
        return Incoming::Blank;
    }
    if let Some(reply) = missing_params(line) {
        return Incoming::Reply(reply);
    }
    let err = match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
        Ok(msg) => return Incoming::Message(Box::new(msg)),
        Err(err) => err,
    };
    let value = match serde_json::from_slice::<Value>(line) {
        Ok(value) => value,
        Err(parse) => {
            tracing::debug!("unparsable input: {parse}");
            return Incoming::Reply(error_reply(
                PARSE_ERROR,
                format!("Parse error: {parse}"),
                Value::Null,
            ));
        }
    };
    let id = value
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned();
    let is_request = value.get("method").is_some() && id.is_some();
    let is_notification = value.get("method").is_some() && id.is_none();
    let is_response = value.get("result").is_some() || value.get("error").is_some();
    if is_notification || (is_response && !is_request) {
        tracing::debug!("dropping an invalid notification or response: {err}");
        return Incoming::Blank;
    }
    tracing::debug!("invalid message: {err}");
    Incoming::Reply(error_reply(
        INVALID_REQUEST,
        format!("Invalid Request: {err}"),
        id.unwrap_or(Value::Null),
    ))
}

/// Methods whose `params` object is required: rmcp takes such a request
/// without one for an unknown method and answers `-32601 Method not found`,
/// which sends a client looking for the wrong mistake (issue 32, U10).
const METHODS_WITH_PARAMS: &[(&str, &str)] = &[(
    "tools/call",
    "{\"name\": \"canopy_query\", \"arguments\": {…}}",
)];

/// `-32602 Invalid params` for a request to a method of
/// [`METHODS_WITH_PARAMS`] whose `params` is missing, `null` or not an object.
fn missing_params(line: &[u8]) -> Option<Value> {
    // Cheap test first: most lines name no such method.
    let names_one = METHODS_WITH_PARAMS
        .iter()
        .any(|(method, _)| line.windows(method.len()).any(|w| w == method.as_bytes()));
    if !names_one {
        return None;
    }
    let value: Value = serde_json::from_slice(line).ok()?;
    let method = value.get("method")?.as_str()?;
    let id = value
        .get("id")
        .filter(|id| id.is_string() || id.is_number())?
        .clone();
    let (_, example) = METHODS_WITH_PARAMS.iter().find(|(m, _)| *m == method)?;
    if value.get("params").is_some_and(Value::is_object) {
        return None;
    }
    Some(error_reply(
        INVALID_PARAMS,
        format!("Invalid params: {method} needs a params object, e.g. {example}"),
        id,
    ))
}

fn error_reply(code: i64, message: String, id: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(line: &str) -> Value {
        match classify(line.as_bytes()) {
            Incoming::Reply(v) => v,
            Incoming::Message(_) => panic!("{line} parsed as a message"),
            Incoming::Blank => panic!("{line} was dropped"),
        }
    }

    #[test]
    fn classifies_input_lines() {
        assert_eq!(reply("{not json")["error"]["code"], PARSE_ERROR);
        assert_eq!(reply("{not json")["id"], Value::Null);
        // tools/call without a params object: invalid params, not an
        // unknown method.
        for params in [r#","params":5"#, r#","params":null"#, ""] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call"{params}}}"#);
            let invalid = reply(&line);
            assert_eq!(invalid["error"]["code"], INVALID_PARAMS, "{line}");
            assert_eq!(invalid["id"], 7);
            let message = invalid["error"]["message"].as_str().unwrap_or("");
            assert!(message.contains("needs a params object"), "{message}");
        }
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"canopy_status","arguments":{}}}"#),
            Incoming::Message(_)
        ));
        assert_eq!(reply("[1,2]")["error"]["code"], INVALID_REQUEST);
        assert!(matches!(classify(b"   "), Incoming::Blank));
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","method":"notifications/made-up","params":5}"#),
            Incoming::Blank | Incoming::Message(_)
        ));
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Incoming::Message(_)
        ));
    }

    #[tokio::test]
    async fn reads_bounded_lines() {
        let input: &[u8] = b"abc\n\ndef";
        let mut reader = BufReader::new(input);
        let mut buf = Vec::new();
        assert!(matches!(
            read_line(&mut reader, &mut buf).await.unwrap(),
            Line::Complete
        ));
        assert_eq!(buf, b"abc");
        assert!(matches!(
            read_line(&mut reader, &mut buf).await.unwrap(),
            Line::Complete
        ));
        assert_eq!(buf, b"");
        assert!(matches!(
            read_line(&mut reader, &mut buf).await.unwrap(),
            Line::Complete
        ));
        assert_eq!(buf, b"def");
        assert!(matches!(
            read_line(&mut reader, &mut buf).await.unwrap(),
            Line::Eof
        ));
    }
}
