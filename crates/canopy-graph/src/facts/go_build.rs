//! Go build constraints: which files a default build on this host
//! (`go build` / `go test` on linux/amd64 with the gc toolchain, cgo on, no
//! `-tags`) compiles, as `go/build`'s default context decides.

/// Operating systems and architectures a file name's `_GOOS` / `_GOARCH`
/// suffix may name (`go/build`'s lists).
const KNOWN_OS: &[&str] = &[
    "aix",
    "android",
    "darwin",
    "dragonfly",
    "freebsd",
    "hurd",
    "illumos",
    "ios",
    "js",
    "linux",
    "nacl",
    "netbsd",
    "openbsd",
    "plan9",
    "solaris",
    "wasip1",
    "windows",
    "zos",
];
const KNOWN_ARCH: &[&str] = &[
    "386",
    "amd64",
    "amd64p32",
    "arm",
    "armbe",
    "arm64",
    "arm64be",
    "loong64",
    "mips",
    "mipsle",
    "mips64",
    "mips64le",
    "mips64p32",
    "mips64p32le",
    "ppc",
    "ppc64",
    "ppc64le",
    "riscv",
    "riscv64",
    "s390",
    "s390x",
    "sparc",
    "sparc64",
    "wasm",
];

/// Whether build tag `tag` holds in a default build here: the host's OS and
/// architecture, `unix`, `gc`, `cgo` and the `go1.N` release tags; every
/// other tag (`windows`, `purego`, a project's own `cmp_debug`) is off
/// until `-tags` sets it, which a default build does not.
fn tag(tag: &str) -> bool {
    matches!(tag, "linux" | "amd64" | "unix" | "gc" | "cgo")
        || tag
            .strip_prefix("go1.")
            .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether a file name's `_GOOS`, `_GOARCH` or `_GOOS_GOARCH` suffix (before
/// `.go` and an optional `_test`) lets a default build here compile it.
pub fn file_name_builds(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let Some(stem) = name.strip_suffix(".go") else {
        return true;
    };
    let stem = stem.strip_suffix("_test").unwrap_or(stem);
    // The part before the first `_` is never a constraint (`linux.go`).
    let Some((_, rest)) = stem.split_once('_') else {
        return true;
    };
    let parts: Vec<&str> = rest.split('_').collect();
    let last = parts[parts.len() - 1];
    if parts.len() >= 2 {
        let os = parts[parts.len() - 2];
        if KNOWN_OS.contains(&os) && KNOWN_ARCH.contains(&last) {
            return tag(os) && tag(last);
        }
    }
    !(KNOWN_OS.contains(&last) || KNOWN_ARCH.contains(&last)) || tag(last)
}

/// Whether the build constraint comments at the top of a file (the lines
/// before its `package` clause) let a default build here compile it:
/// `//go:build expr` when there is one, else every `// +build` line
/// (each one's space-separated options, of comma-joined terms) must hold.
/// `None` when a `//go:build` expression cannot be read (the file is kept).
pub fn header_builds(comments: &[&str]) -> Option<bool> {
    let lines: Vec<&str> = comments
        .iter()
        .flat_map(|c| c.lines())
        .map(str::trim)
        .collect();
    if let Some(expr) = lines.iter().find_map(|l| l.strip_prefix("//go:build")) {
        let mut p = Expr { rest: expr.trim() };
        let v = p.or()?;
        return p.rest.trim().is_empty().then_some(v);
    }
    Some(
        lines
            .iter()
            .filter_map(|l| l.strip_prefix("//")?.trim_start().strip_prefix("+build"))
            .all(|options| {
                options.split_whitespace().any(|option| {
                    option.split(',').all(|term| match term.strip_prefix('!') {
                        Some(t) => !tag(t),
                        None => tag(term),
                    })
                })
            }),
    )
}

/// A `//go:build` expression reader: `||`, `&&`, `!`, parentheses, tags.
struct Expr<'a> {
    rest: &'a str,
}

impl Expr<'_> {
    fn eat(&mut self, token: &str) -> bool {
        let s = self.rest.trim_start();
        match s.strip_prefix(token) {
            Some(r) => {
                self.rest = r;
                true
            }
            None => false,
        }
    }

    fn or(&mut self) -> Option<bool> {
        let mut v = self.and()?;
        while self.eat("||") {
            v |= self.and()?;
        }
        Some(v)
    }

    fn and(&mut self) -> Option<bool> {
        let mut v = self.not()?;
        while self.eat("&&") {
            v &= self.not()?;
        }
        Some(v)
    }

    fn not(&mut self) -> Option<bool> {
        if self.eat("!") {
            return self.not().map(|v| !v);
        }
        if self.eat("(") {
            let v = self.or()?;
            return self.eat(")").then_some(v);
        }
        let s = self.rest.trim_start();
        let end = s
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(s.len());
        if end == 0 {
            return None;
        }
        self.rest = &s[end..];
        Some(tag(&s[..end]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_constraints_are_evaluated_as_a_default_linux_amd64_build() {
        assert_eq!(header_builds(&["//go:build !purego"]), Some(true));
        assert_eq!(
            header_builds(&["//go:build purego", "// +build purego"]),
            Some(false)
        );
        assert_eq!(
            header_builds(&["//go:build linux && (amd64 || arm64)"]),
            Some(true)
        );
        assert_eq!(
            header_builds(&["//go:build windows || cmp_debug"]),
            Some(false)
        );
        assert_eq!(header_builds(&["//go:build go1.18 && !js"]), Some(true));
        assert_eq!(header_builds(&["// +build linux,!cgo darwin"]), Some(false));
        assert_eq!(
            header_builds(&["// +build linux,cgo darwin", "// +build amd64"]),
            Some(true)
        );
        assert_eq!(header_builds(&["// Package x does y."]), Some(true));
        assert_eq!(header_builds(&["//go:build (linux"]), None);

        assert!(file_name_builds("a/poll_linux.go"));
        assert!(file_name_builds("a/poll_linux_amd64_test.go"));
        assert!(!file_name_builds("a/poll_windows.go"));
        assert!(!file_name_builds("a/poll_windows_test.go"));
        assert!(!file_name_builds("a/asm_arm64.go"));
        assert!(!file_name_builds("a/sys_linux_arm64.go"));
        assert!(file_name_builds("a/windows.go"));
        assert!(file_name_builds("a/debug_disable.go"));
        assert!(file_name_builds("a/x_test.go"));
    }
}
