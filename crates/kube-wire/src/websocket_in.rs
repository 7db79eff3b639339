//! What a watch's websocket reads from its client, as kube-apiserver reads it
//! (`handlers/watch.go` `HandleWS` → `wsstream.IgnoreReceives` over `golang.org/x/net/websocket`):
//! clients send nothing meaningful, so data frames are skipped; a ping is answered with a pong
//! carrying its first 125 bytes; a close frame, a data frame longer than x/net's
//! `DefaultMaxPayloadBytes` (32 MiB), or an unmasked frame ends the watch.
//!
//! A sans-I/O parser ([`ClientFrames`]): the servers feed it the bytes they read and act on what
//! it reports. It never holds a frame's payload (only a ping's first 125 bytes), whatever length
//! a client announces, so a client cannot make a server buffer anything.

/// The longest data frame a client may send (x/net/websocket's `DefaultMaxPayloadBytes`): a
/// longer one ends the watch (kube's `Receive` fails with `ErrFrameTooLarge`).
pub const MAX_CLIENT_FRAME: u64 = 32 << 20;

/// The most of a ping's payload that is echoed (x/net reads `maxControlFramePayloadLength`).
const MAX_CONTROL_PAYLOAD: usize = 125;

/// What the server must do about the client's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    /// Answer with a pong carrying these bytes (unmasked).
    Ping(Vec<u8>),
    /// Stop reading and end the watch, closing the connection with this websocket close code:
    /// 1000 after the client's close, a frame too large or the end of its stream; 1002 (protocol
    /// error) after an unmasked frame, which x/net refuses from a client.
    End(u16),
}

/// Where the parser is within the client's stream.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Reading a frame header (at most 14 bytes).
    Header,
    /// Skipping this many payload bytes of a data frame (or of a ping's tail).
    Skip(u64),
    /// Reading a ping's first bytes (unmasking them with `key`), then skipping `rest`.
    Ping {
        want: usize,
        key: [u8; 4],
        rest: u64,
    },
    /// The watch ended: nothing more is read.
    Done,
}

/// The parser of a client's frames (see the module docs).
#[derive(Debug, Clone)]
pub struct ClientFrames {
    state: State,
    head: [u8; 14],
    head_len: usize,
    ping: Vec<u8>,
}

impl Default for ClientFrames {
    fn default() -> Self {
        ClientFrames {
            state: State::Header,
            head: [0; 14],
            head_len: 0,
            ping: Vec::new(),
        }
    }
}

impl ClientFrames {
    /// Whether the watch ended (an [`Inbound::End`] was reported).
    pub fn ended(&self) -> bool {
        self.state == State::Done
    }

    /// Consumes `bytes` (the next ones the client sent), pushing onto `out` what the server must
    /// do. After an [`Inbound::End`], further bytes are ignored.
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<Inbound>) {
        while !bytes.is_empty() {
            match &mut self.state {
                State::Done => return,
                State::Header => {
                    let Some(&b) = bytes.first() else { return };
                    if let Some(slot) = self.head.get_mut(self.head_len) {
                        *slot = b;
                    }
                    self.head_len += 1;
                    bytes = bytes.get(1..).unwrap_or_default();
                    if let Some(e) = self.header_done() {
                        out.push(e);
                    }
                }
                State::Skip(n) => {
                    let k = usize::try_from(*n).unwrap_or(usize::MAX).min(bytes.len());
                    *n -= k as u64;
                    bytes = bytes.get(k..).unwrap_or_default();
                    if *n == 0 {
                        self.state = State::Header;
                    }
                }
                State::Ping { want, key, rest } => {
                    let k = (*want - self.ping.len()).min(bytes.len());
                    for &b in bytes.get(..k).unwrap_or_default() {
                        let i = self.ping.len() % 4;
                        self.ping.push(b ^ key.get(i).copied().unwrap_or(0));
                    }
                    bytes = bytes.get(k..).unwrap_or_default();
                    if self.ping.len() == *want {
                        let rest = *rest;
                        out.push(Inbound::Ping(std::mem::take(&mut self.ping)));
                        self.state = if rest == 0 {
                            State::Header
                        } else {
                            State::Skip(rest)
                        };
                    }
                }
            }
        }
    }

    /// The client's stream ended (or failed): the watch ends.
    pub fn finish(&mut self, out: &mut Vec<Inbound>) {
        if self.state != State::Done {
            self.state = State::Done;
            out.push(Inbound::End(1000));
        }
    }

    /// Once the header is whole: what its frame means, and the state after it.
    fn header_done(&mut self) -> Option<Inbound> {
        let h = &self.head[..self.head_len];
        let (Some(&b0), Some(&b1)) = (h.first(), h.get(1)) else {
            return None;
        };
        let masked = b1 & 0x80 != 0;
        let ext = match b1 & 0x7f {
            126 => 2,
            127 => 8,
            _ => 0,
        };
        let need = 2 + ext + if masked { 4 } else { 0 };
        if self.head_len < need {
            return None;
        }
        self.head_len = 0;
        let mut len = match ext {
            0 => u64::from(b1 & 0x7f),
            n => h
                .get(2..2 + n)?
                .iter()
                .fold(0u64, |a, &b| (a << 8) | u64::from(b)),
        };
        // x/net reads the 64-bit length into an int64: one with the top bit set is negative,
        // and such a frame has no payload to read.
        if len > i64::MAX as u64 {
            len = 0;
        }
        if !masked {
            self.state = State::Done;
            return Some(Inbound::End(1002));
        }
        let mut key = [0u8; 4];
        key.copy_from_slice(h.get(2 + ext..6 + ext)?);
        match b0 & 0x0f {
            // Close: x/net stops at its header.
            0x8 => {
                self.state = State::Done;
                Some(Inbound::End(1000))
            }
            // Ping and pong: the first 125 bytes are read (and a ping answered), the rest skipped.
            op @ (0x9 | 0xa) => {
                let want = usize::try_from(len)
                    .unwrap_or(MAX_CONTROL_PAYLOAD)
                    .min(MAX_CONTROL_PAYLOAD);
                let rest = len - want as u64;
                self.state = match (op, want) {
                    (0x9, 0) => {
                        self.state = if rest == 0 {
                            State::Header
                        } else {
                            State::Skip(rest)
                        };
                        return Some(Inbound::Ping(Vec::new()));
                    }
                    (0x9, _) => State::Ping { want, key, rest },
                    _ if len == 0 => State::Header,
                    _ => State::Skip(len),
                };
                None
            }
            // Data (and any other opcode): skipped, unless longer than x/net accepts.
            _ if len > MAX_CLIENT_FRAME => {
                self.state = State::Done;
                Some(Inbound::End(1000))
            }
            _ if len == 0 => None,
            _ => {
                self.state = State::Skip(len);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A client frame: masked with `key` unless `key` is None.
    fn frame(op: u8, payload: &[u8], key: Option<[u8; 4]>) -> Vec<u8> {
        let mut f = vec![0x80 | op];
        let m = if key.is_some() { 0x80 } else { 0 };
        match payload.len() {
            n if n < 126 => f.push(m | n as u8),
            n if n < 65536 => {
                f.push(m | 126);
                f.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                f.push(m | 127);
                f.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        if let Some(k) = key {
            f.extend_from_slice(&k);
            f.extend(payload.iter().enumerate().map(|(i, b)| b ^ k[i % 4]));
        } else {
            f.extend_from_slice(payload);
        }
        f
    }

    fn run(bytes: &[u8]) -> Vec<Inbound> {
        let mut p = ClientFrames::default();
        let mut out = Vec::new();
        p.feed(bytes, &mut out);
        out
    }

    const K: Option<[u8; 4]> = Some([1, 2, 3, 4]);

    #[test]
    fn data_is_skipped_and_pings_answered() {
        let mut s = frame(0x1, b"hello", K);
        s.extend(frame(0x2, &[7; 70_000], K));
        s.extend(frame(0x9, b"are you there", K));
        s.extend(frame(0xa, b"pong", K));
        s.extend(frame(0x9, b"", K));
        s.extend(frame(0x8, &[0x03, 0xe8], K));
        s.extend(frame(0x9, b"after close", K));
        assert_eq!(
            run(&s),
            vec![
                Inbound::Ping(b"are you there".to_vec()),
                Inbound::Ping(Vec::new()),
                Inbound::End(1000)
            ]
        );
    }

    #[test]
    fn a_long_ping_is_echoed_up_to_125_bytes() {
        let payload: Vec<u8> = (0..=255).collect();
        let mut s = frame(0x9, &payload, K);
        s.extend(frame(0x9, b"x", K));
        assert_eq!(
            run(&s),
            vec![
                Inbound::Ping(payload[..125].to_vec()),
                Inbound::Ping(b"x".to_vec())
            ]
        );
    }

    #[test]
    fn oversized_and_unmasked_frames_end_the_watch() {
        // Only the header is needed: a client announcing 32 MiB + 1 is refused at once.
        let mut huge = vec![0x82, 0x80 | 127];
        huge.extend_from_slice(&(MAX_CLIENT_FRAME + 1).to_be_bytes());
        huge.extend_from_slice(&[0; 4]);
        assert_eq!(run(&huge), vec![Inbound::End(1000)]);
        // Exactly 32 MiB is skipped without being held.
        let mut p = ClientFrames::default();
        let mut out = Vec::new();
        let mut max = vec![0x82, 0x80 | 127];
        max.extend_from_slice(&MAX_CLIENT_FRAME.to_be_bytes());
        max.extend_from_slice(&[0; 4]);
        p.feed(&max, &mut out);
        let chunk = vec![0u8; 1 << 20];
        for _ in 0..32 {
            p.feed(&chunk, &mut out);
        }
        p.feed(&frame(0x9, b"still here", K), &mut out);
        assert_eq!(out, vec![Inbound::Ping(b"still here".to_vec())]);
        assert_eq!(run(&frame(0x1, b"hi", None)), vec![Inbound::End(1002)]);
        let mut p = ClientFrames::default();
        let mut out = Vec::new();
        p.finish(&mut out);
        p.finish(&mut out);
        assert_eq!(out, vec![Inbound::End(1000)]);
        assert!(p.ended());
    }

    proptest! {
        /// However the stream is cut into reads, the same things happen.
        #[test]
        fn splitting_never_changes_the_outcome(
            frames in proptest::collection::vec((0u8..16, proptest::collection::vec(any::<u8>(), 0..300), any::<bool>()), 0..8),
            cuts in proptest::collection::vec(1usize..64, 0..40),
        ) {
            let mut s = Vec::new();
            for (op, payload, masked) in &frames {
                s.extend(frame(*op, payload, masked.then_some([9, 8, 7, 6])));
            }
            let whole = run(&s);
            let mut p = ClientFrames::default();
            let mut out = Vec::new();
            let mut rest = &s[..];
            for c in cuts {
                let k = c.min(rest.len());
                p.feed(&rest[..k], &mut out);
                rest = &rest[k..];
            }
            p.feed(rest, &mut out);
            prop_assert_eq!(out, whole);
        }

        /// Arbitrary bytes never panic, and nothing beyond a ping's 125 bytes is ever kept.
        #[test]
        fn any_bytes_are_safe(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let mut p = ClientFrames::default();
            let mut out = Vec::new();
            p.feed(&bytes, &mut out);
            prop_assert!(p.ping.capacity() <= 1024);
            for e in out {
                if let Inbound::Ping(b) = e {
                    prop_assert!(b.len() <= 125);
                }
            }
        }
    }
}
