//! A small blocking HTTP/1.1 client over one keep-alive TCP connection on
//! loopback: enough for the tests and the load benchmark, and it sends
//! exactly the bytes asked for (no client-side checks to get in the way).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A response: status, headers (names lower-cased) and body.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    /// A header's value.
    #[allow(dead_code)]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One connection.
pub struct Connection {
    address: SocketAddr,
    reader: Option<BufReader<TcpStream>>,
}

impl Connection {
    pub fn new(address: SocketAddr) -> Self {
        Self {
            address,
            reader: None,
        }
    }

    fn stream(&mut self) -> std::io::Result<&mut BufReader<TcpStream>> {
        if self.reader.is_none() {
            let stream = TcpStream::connect(self.address)?;
            stream.set_nodelay(true)?;
            stream.set_read_timeout(Some(Duration::from_secs(120)))?;
            self.reader = Some(BufReader::new(stream));
        }
        Ok(self.reader.as_mut().expect("connected"))
    }

    /// Sends a request; `key` becomes a bearer header, `body` JSON.
    pub fn send(
        &mut self,
        method: &str,
        path: &str,
        key: Option<&str>,
        body: Option<&str>,
    ) -> std::io::Result<Response> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.address);
        if let Some(key) = key {
            head.push_str(&format!("Authorization: Bearer {key}\r\n"));
        }
        if let Some(body) = body {
            head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        head.push_str("\r\n");
        let outcome = self.exchange(head.as_bytes(), body.unwrap_or("").as_bytes());
        if outcome.is_err() {
            self.reader = None;
        }
        outcome
    }

    /// Sends raw bytes as a request and reads one response.
    pub fn exchange(&mut self, head: &[u8], body: &[u8]) -> std::io::Result<Response> {
        let reader = self.stream()?;
        reader.get_mut().write_all(head)?;
        reader.get_mut().write_all(body)?;
        read_response(reader)
    }
}

fn read_response(reader: &mut BufReader<TcpStream>) -> std::io::Result<Response> {
    let broken =
        |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "closed",
        ));
    }
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| broken("status line"))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        let (name, value) = trimmed.split_once(':').ok_or_else(|| broken("header"))?;
        headers.push((name.to_ascii_lowercase(), value.trim().to_string()));
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .ok_or_else(|| broken("no content-length"))?;
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(Response {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// One request on a fresh connection.
#[allow(dead_code)]
pub fn request(
    address: SocketAddr,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: Option<&str>,
) -> Response {
    Connection::new(address)
        .send(method, path, key, body)
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}
