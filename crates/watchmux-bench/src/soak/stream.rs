//! A soak watcher's connection to watchmux: opens a watch as chunked HTTP or as a websocket,
//! in JSON or protobuf, and hands out one event at a time ([`EventStream::next`]), so the
//! watcher decides when to read: a slow reader pauses between events, a stalled one stops
//! reading altogether (and may ask for a small socket buffer, so that watchmux, not the kernel,
//! holds what it does not read).
//!
//! Transport only: the chunked framing, line and length-prefix splitting (checked, never
//! trusted), websocket messages. It does not decode events ([`super::events`]) nor retry.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::Message;

use super::events::{StatusInfo, json_status};
use crate::client::{Conn, Encoding};
use crate::pbframe::MAX_FRAME;

/// How a watch is carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Transport {
    /// A chunked HTTP/1.1 response.
    Chunked,
    /// A websocket, one message per event.
    Websocket,
}

impl Transport {
    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Chunked => "chunked",
            Transport::Websocket => "websocket",
        }
    }
}

/// Where and how to connect.
#[derive(Debug, Clone, Copy)]
pub struct Dial {
    /// watchmux's address.
    pub addr: SocketAddr,
    /// `SO_RCVBUF` to ask for (stalled readers ask for a small one).
    pub recv_buffer: Option<u32>,
    /// Most bytes taken from the socket per read (slow readers read little at a time).
    pub read_limit: usize,
}

/// Connects a TCP socket with the dial's options.
pub async fn connect(dial: &Dial) -> io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    if let Some(size) = dial.recv_buffer {
        socket.set_recv_buffer_size(size)?;
    }
    let stream = socket.connect(dial.addr).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// What opening a watch gave.
pub enum Opened {
    /// A 200 (or a completed websocket handshake): events follow.
    Stream(EventStream),
    /// Another answer.
    Refused {
        /// HTTP status.
        status: u16,
        /// `Retry-After` seconds.
        retry_after: Option<u64>,
        /// The Status in the body (code 0 when none).
        info: StatusInfo,
    },
}

/// How a stream stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// The body ended (chunked) or the connection closed without a close frame (websocket).
    Clean,
    /// A websocket close frame.
    Closed {
        /// Its code.
        code: u16,
    },
    /// The connection broke (reset, early EOF, bad framing).
    Aborted(String),
}

/// What [`EventStream::next`] read.
pub enum Next {
    /// One event: a JSON line without its newline, or (`protobuf`) a `WatchEvent` message.
    Event {
        /// Its bytes.
        data: Bytes,
        /// In protobuf (the answer's `Content-Type`, or a websocket binary message).
        protobuf: bool,
    },
    /// The stream stopped.
    End(End),
}

/// An open watch.
pub struct EventStream {
    inner: Inner,
}

enum Inner {
    Chunked(Box<Chunked>),
    Websocket(Box<WebSocketStream<TcpStream>>),
}

/// Opens `path_and_query` as a watch over `transport` in `encoding`.
pub async fn open(
    dial: &Dial,
    transport: Transport,
    encoding: Encoding,
    path_and_query: &str,
) -> io::Result<Opened> {
    let stream = connect(dial).await?;
    match transport {
        Transport::Chunked => {
            let mut c = Conn::from_stream(stream, dial.addr.to_string());
            c.get_as(path_and_query, encoding).await?;
            let head = c.read_head().await?;
            if head.status != 200 {
                let mut body = Vec::new();
                c.read_body(&head, |p| {
                    if body.len() < 64 * 1024 {
                        body.extend_from_slice(p);
                    }
                })
                .await?;
                return Ok(Opened::Refused {
                    status: head.status,
                    retry_after: head.retry_after,
                    info: json_status(&body),
                });
            }
            let (stream, buf) = c.into_parts();
            Ok(Opened::Stream(EventStream {
                inner: Inner::Chunked(Box::new(Chunked {
                    stream,
                    raw: buf,
                    protobuf: Encoding::Protobuf.answered_by(head.content_type.as_deref()),
                    state: if head.chunked {
                        ChunkState::Size
                    } else {
                        ChunkState::Unframed
                    },
                    payload: BytesMut::new(),
                    events: VecDeque::new(),
                    read_limit: dial.read_limit.max(1),
                })),
            }))
        }
        Transport::Websocket => {
            let mut req = format!("ws://{}{}", dial.addr, path_and_query)
                .into_client_request()
                .map_err(io::Error::other)?;
            req.headers_mut().insert(
                http::header::ACCEPT,
                http::HeaderValue::from_static(encoding.accept()),
            );
            match tokio_tungstenite::client_async(req, stream).await {
                Ok((ws, _)) => Ok(Opened::Stream(EventStream {
                    inner: Inner::Websocket(Box::new(ws)),
                })),
                Err(WsError::Http(resp)) => Ok(Opened::Refused {
                    status: resp.status().as_u16(),
                    retry_after: resp
                        .headers()
                        .get(http::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse().ok()),
                    info: json_status(resp.body().as_deref().unwrap_or_default()),
                }),
                Err(e) => Err(io::Error::other(e)),
            }
        }
    }
}

impl EventStream {
    /// The next event, or how the stream stopped. Cancel-safe: dropping the future loses no
    /// byte already read.
    pub async fn next(&mut self) -> Next {
        match &mut self.inner {
            Inner::Chunked(c) => c.next().await,
            Inner::Websocket(ws) => loop {
                match ws.next().await {
                    None | Some(Err(WsError::ConnectionClosed | WsError::AlreadyClosed)) => {
                        return Next::End(End::Clean);
                    }
                    Some(Ok(Message::Close(frame))) => {
                        return Next::End(End::Closed {
                            code: frame.map_or(1005, |f| u16::from(f.code)),
                        });
                    }
                    Some(Ok(m @ (Message::Text(_) | Message::Binary(_)))) => {
                        let protobuf = m.is_binary();
                        let mut data = m.into_data();
                        if data.last() == Some(&b'\n') {
                            data.truncate(data.len() - 1);
                        }
                        return Next::Event { data, protobuf };
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Next::End(End::Aborted(e.to_string())),
                }
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk: this many payload bytes left.
    Data(u64),
    /// Expecting the CRLF after a chunk's data.
    Crlf,
    /// The last chunk arrived.
    Done,
    /// Not chunked: the payload runs to the end of the connection.
    Unframed,
}

/// A chunked body read on demand, split into events.
struct Chunked {
    stream: TcpStream,
    /// Bytes read from the socket, not decoded yet.
    raw: BytesMut,
    state: ChunkState,
    /// Payload not yet split into whole events.
    payload: BytesMut,
    events: VecDeque<Bytes>,
    protobuf: bool,
    read_limit: usize,
}

fn bad(msg: impl Into<String>) -> End {
    End::Aborted(msg.into())
}

impl Chunked {
    async fn next(&mut self) -> Next {
        loop {
            if let Some(data) = self.events.pop_front() {
                return Next::Event {
                    data,
                    protobuf: self.protobuf,
                };
            }
            if self.state == ChunkState::Done {
                return Next::End(End::Clean);
            }
            if let Err(e) = self.decode() {
                return Next::End(e);
            }
            if !self.events.is_empty() || self.state == ChunkState::Done {
                continue;
            }
            if self.raw.capacity() - self.raw.len() < self.read_limit {
                self.raw.reserve(self.read_limit);
            }
            let limit = self.read_limit as u64;
            match (&mut self.stream).take(limit).read_buf(&mut self.raw).await {
                Ok(0) if self.state == ChunkState::Unframed => {
                    self.state = ChunkState::Done;
                }
                Ok(0) => return Next::End(bad("connection closed inside the body")),
                Ok(_) => {}
                Err(e) => return Next::End(bad(e.to_string())),
            }
        }
    }

    /// Moves what `raw` holds through the chunked framing into `payload`, then splits whole
    /// events off `payload`.
    fn decode(&mut self) -> Result<(), End> {
        loop {
            match self.state {
                ChunkState::Size => {
                    let Some(i) = memchr::memmem::find(&self.raw, b"\r\n") else {
                        if self.raw.len() > 1024 {
                            return Err(bad("chunk size line too long"));
                        }
                        break;
                    };
                    let line = std::str::from_utf8(&self.raw[..i])
                        .map_err(|_| bad("chunk size not ASCII"))?;
                    let size = line.split(';').next().unwrap_or("").trim();
                    let n = u64::from_str_radix(size, 16)
                        .map_err(|_| bad(format!("bad chunk size {size:?}")))?;
                    let _ = self.raw.split_to(i + 2);
                    self.state = if n == 0 {
                        ChunkState::Done
                    } else {
                        ChunkState::Data(n)
                    };
                }
                ChunkState::Data(left) => {
                    if self.raw.is_empty() {
                        break;
                    }
                    let n = usize::try_from(left)
                        .unwrap_or(usize::MAX)
                        .min(self.raw.len());
                    self.payload.extend_from_slice(&self.raw.split_to(n));
                    let left = left - n as u64;
                    self.state = if left == 0 {
                        ChunkState::Crlf
                    } else {
                        ChunkState::Data(left)
                    };
                }
                ChunkState::Crlf => {
                    if self.raw.len() < 2 {
                        break;
                    }
                    if &self.raw[..2] != b"\r\n" {
                        return Err(bad("chunk not followed by CRLF"));
                    }
                    let _ = self.raw.split_to(2);
                    self.state = ChunkState::Size;
                }
                ChunkState::Unframed => {
                    let all = self.raw.split();
                    self.payload.extend_from_slice(&all);
                    break;
                }
                ChunkState::Done => break,
            }
        }
        self.split_events()
    }

    fn split_events(&mut self) -> Result<(), End> {
        if self.protobuf {
            while let Some(p) = self.payload.get(..4) {
                let len = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) as usize;
                if len > MAX_FRAME {
                    return Err(bad(format!("protobuf frame of {len} bytes")));
                }
                if self.payload.len() < 4 + len {
                    break;
                }
                let frame = self.payload.split_to(4 + len).freeze();
                self.events.push_back(frame.slice(4..));
            }
        } else {
            while let Some(i) = memchr::memchr(b'\n', &self.payload) {
                let line = self.payload.split_to(i + 1).freeze();
                if i > 0 {
                    self.events.push_back(line.slice(..i));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// Serves one connection: reads the request, writes `answer`, closes.
    async fn serve_once(answer: Vec<u8>) -> SocketAddr {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut b = vec![0u8; 4096];
            let _ = s.read(&mut b).await.unwrap();
            s.write_all(&answer).await.unwrap();
        });
        addr
    }

    fn dial(addr: SocketAddr, read_limit: usize) -> Dial {
        Dial {
            addr,
            recv_buffer: Some(4096),
            read_limit,
        }
    }

    async fn events(mut s: EventStream) -> (Vec<Bytes>, End) {
        let mut got = Vec::new();
        loop {
            match s.next().await {
                Next::Event { data, .. } => got.push(data),
                Next::End(end) => return (got, end),
            }
        }
    }

    #[tokio::test]
    async fn chunked_lines_and_frames_split_whatever_the_read_size() {
        let mut body = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for piece in [&b"{\"a\":1}\n{\"b\""[..], b":2}\n", b"{\"c\":3}\n"] {
            body.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            body.extend_from_slice(piece);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(b"0\r\n\r\n");
        for limit in [1, 3, 7, 4096] {
            let addr = serve_once(body.clone()).await;
            let Opened::Stream(s) =
                open(&dial(addr, limit), Transport::Chunked, Encoding::Json, "/w")
                    .await
                    .unwrap()
            else {
                panic!("not a stream")
            };
            let (got, end) = events(s).await;
            assert_eq!(
                got,
                [&b"{\"a\":1}"[..], b"{\"b\":2}", b"{\"c\":3}"],
                "{limit}"
            );
            assert_eq!(end, End::Clean);
        }
        // Protobuf frames, and a connection that breaks inside the body.
        let frames: Vec<u8> = [&b"xy"[..], b"", b"abc"]
            .iter()
            .flat_map(|f| kube_wire::proto::envelope::length_prefixed(f))
            .collect();
        let mut body = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/vnd.kubernetes.protobuf;stream=watch\r\n\r\n".to_vec();
        body.extend_from_slice(format!("{:x}\r\n", frames.len()).as_bytes());
        body.extend_from_slice(&frames);
        body.extend_from_slice(b"\r\n");
        let addr = serve_once(body).await;
        let Opened::Stream(s) = open(&dial(addr, 5), Transport::Chunked, Encoding::Protobuf, "/w")
            .await
            .unwrap()
        else {
            panic!("not a stream")
        };
        let (got, end) = events(s).await;
        assert_eq!(got, [&b"xy"[..], b"", b"abc"]);
        assert!(matches!(end, End::Aborted(_)), "{end:?}");
    }

    #[tokio::test]
    async fn refusals_carry_their_status() {
        let body = br#"{"kind":"Status","code":429,"reason":"TooManyRequests","message":"m"}"#;
        let mut answer = format!(
            "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 2\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        answer.extend_from_slice(body);
        let addr = serve_once(answer).await;
        let Opened::Refused {
            status,
            retry_after,
            info,
        } = open(&dial(addr, 4096), Transport::Chunked, Encoding::Json, "/w")
            .await
            .unwrap()
        else {
            panic!("not refused")
        };
        assert_eq!((status, retry_after, info.code), (429, Some(2), 429));
        assert_eq!(info.reason, "TooManyRequests");
    }
}
