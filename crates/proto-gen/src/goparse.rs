//! Reads the top-level type declarations of a Go package: each `type Name <type>` with its
//! struct fields and tags, the file's imports (to resolve `pkg.Name`), and which types have
//! hand-written `MarshalJSON`/`UnmarshalJSON` methods (which the generator must not expand as
//! plain structs).
//!
//! Everything else in a file (functions, constants, variables) is skipped by bracket counting.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::lex::{Tok, Token, lex};

/// A Go type expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoType {
    /// `Name` or `pkg.Name` (builtins have no package).
    Named(Option<String>, String),
    /// `*T`.
    Ptr(Box<GoType>),
    /// `[]T`.
    Slice(Box<GoType>),
    /// `[N]T`.
    Array(Box<GoType>),
    /// `map[K]V`.
    Map(Box<GoType>, Box<GoType>),
    /// `struct { … }`.
    Struct(Vec<GoField>),
    /// Anything the generator never represents (interfaces, funcs, channels, generics).
    Opaque(&'static str),
}

/// One struct field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoField {
    /// The Go field name (the type's name for an embedded field).
    pub name: String,
    /// Whether the field is embedded.
    pub embedded: bool,
    /// The field's type.
    pub ty: GoType,
    /// The raw struct tag.
    pub tag: String,
}

/// A type declaration and the imports of its file.
#[derive(Debug, Clone)]
pub struct Decl {
    /// The declared type.
    pub ty: GoType,
    /// Import alias → import path, of the declaring file.
    pub imports: BTreeMap<String, String>,
    /// `+protobuf…` markers of the declaration's doc comment.
    pub markers: Vec<String>,
}

/// A parsed package.
#[derive(Debug, Default)]
pub struct Package {
    /// Type name → declaration.
    pub types: BTreeMap<String, Decl>,
    /// Types with a `MarshalJSON` or `UnmarshalJSON` method.
    pub json_methods: BTreeSet<String>,
}

/// Parses every non-test `.go` file of a directory.
pub fn parse_dir(dir: &Path) -> Result<Package, String> {
    let mut pkg = Package::default();
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "go") && !p.to_string_lossy().ends_with("_test.go")
        })
        .collect();
    files.sort();
    for file in files {
        let src = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        if build_excluded(&src) {
            continue;
        }
        let tokens = lex(&src).map_err(|e| format!("{}: {e}", file.display()))?;
        Parser { t: &tokens, i: 0 }
            .file(&mut pkg)
            .map_err(|e| format!("{}: {e}", file.display()))?;
    }
    Ok(pkg)
}

/// Whether a file is left out of the default build: `//go:build` constraints that name a
/// non-default tag (kube's `fieldsv1string` variant) or `ignore`.
fn build_excluded(src: &str) -> bool {
    src.lines()
        .take_while(|l| !l.starts_with("package "))
        .filter_map(|l| l.strip_prefix("//go:build "))
        .any(|c| {
            let c = c.trim();
            !c.starts_with('!') && !c.contains("||") && !c.contains(' ')
        })
}

struct Parser<'a> {
    t: &'a [Token],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.t.get(self.i).map(|t| &t.tok)
    }

    fn peek_at(&self, n: usize) -> Option<&Tok> {
        self.t.get(self.i + n).map(|t| &t.tok)
    }

    fn next(&mut self) -> Result<&Tok, String> {
        let t = self.t.get(self.i).ok_or("unexpected end of file")?;
        self.i += 1;
        Ok(&t.tok)
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        match self.next()? {
            Tok::Punct(p) if *p == c => Ok(()),
            other => Err(format!("expected {c:?}, found {other:?}")),
        }
    }

    fn ident(&mut self) -> Result<String, String> {
        match self.next()? {
            Tok::Ident(s) => Ok(s.clone()),
            other => Err(format!("expected an identifier, found {other:?}")),
        }
    }

    fn skip_newlines(&mut self) {
        while matches!(self.peek(), Some(Tok::Newline) | Some(Tok::Punct(';'))) {
            self.i += 1;
        }
    }

    /// Skips a balanced bracket group starting at the current opening bracket.
    fn skip_group(&mut self) -> Result<(), String> {
        let mut depth = 0i32;
        loop {
            match self.next()? {
                Tok::Punct('(' | '[' | '{') => depth += 1,
                Tok::Punct(')' | ']' | '}') => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(());
                    }
                }
                _ => {}
            }
        }
    }

    fn file(&mut self, pkg: &mut Package) -> Result<(), String> {
        let mut imports = BTreeMap::new();
        let mut depth = 0i32;
        while let Some(tok) = self.peek().cloned() {
            match tok {
                Tok::Punct('(' | '[' | '{') => {
                    depth += 1;
                    self.i += 1;
                }
                Tok::Punct(')' | ']' | '}') => {
                    depth -= 1;
                    self.i += 1;
                }
                Tok::Ident(ref k) if depth == 0 && k == "import" => {
                    self.i += 1;
                    self.imports(&mut imports)?;
                }
                Tok::Ident(ref k) if depth == 0 && k == "type" => {
                    let markers = self.t[self.i].markers.clone();
                    self.i += 1;
                    if self.peek() == Some(&Tok::Punct('(')) {
                        self.i += 1;
                        loop {
                            self.skip_newlines();
                            if self.peek() == Some(&Tok::Punct(')')) {
                                self.i += 1;
                                break;
                            }
                            let m = self.t.get(self.i).map(|t| t.markers.clone());
                            self.type_spec(pkg, &imports, m.unwrap_or_default())?;
                        }
                    } else {
                        self.type_spec(pkg, &imports, markers)?;
                    }
                }
                Tok::Ident(ref k) if depth == 0 && k == "func" => {
                    self.i += 1;
                    self.method(pkg)?;
                }
                _ => self.i += 1,
            }
        }
        Ok(())
    }

    fn imports(&mut self, imports: &mut BTreeMap<String, String>) -> Result<(), String> {
        let grouped = self.peek() == Some(&Tok::Punct('('));
        if grouped {
            self.i += 1;
        }
        loop {
            self.skip_newlines();
            match self.next()?.clone() {
                Tok::Punct(')') if grouped => return Ok(()),
                Tok::Str(path) => {
                    let alias = path.rsplit('/').next().unwrap_or(&path).to_string();
                    imports.insert(alias, path);
                }
                Tok::Ident(alias) => match self.next()?.clone() {
                    Tok::Str(path) => {
                        imports.insert(alias, path);
                    }
                    other => return Err(format!("bad import {other:?}")),
                },
                Tok::Punct('.') => {
                    self.next()?;
                }
                other => return Err(format!("bad import {other:?}")),
            }
            if !grouped {
                return Ok(());
            }
        }
    }

    /// `func (r *T) MarshalJSON(` records `T`; anything else is left to the caller's skipping.
    fn method(&mut self, pkg: &mut Package) -> Result<(), String> {
        if self.peek() != Some(&Tok::Punct('(')) {
            return Ok(());
        }
        let mut receiver = None;
        while let Some(tok) = self.peek().cloned() {
            self.i += 1;
            match tok {
                Tok::Ident(name) => receiver = Some(name),
                Tok::Punct(')') => break,
                _ => {}
            }
        }
        if let (Some(recv), Some(Tok::Ident(name))) = (receiver, self.peek())
            && (name == "MarshalJSON" || name == "UnmarshalJSON")
        {
            pkg.json_methods.insert(recv);
        }
        // The parameter lists and the body are left to the top-level bracket counting.
        Ok(())
    }

    fn type_spec(
        &mut self,
        pkg: &mut Package,
        imports: &BTreeMap<String, String>,
        mut markers: Vec<String>,
    ) -> Result<(), String> {
        markers.extend(
            self.t
                .get(self.i)
                .map(|t| t.markers.clone())
                .unwrap_or_default(),
        );
        let name = self.ident()?;
        // Generic type parameters: `type X[T any] …` (an array type is `type X [N]T`).
        let ty = if self.peek() == Some(&Tok::Punct('['))
            && matches!(self.peek_at(1), Some(Tok::Ident(_)))
            && self.peek_at(2) != Some(&Tok::Punct(']'))
        {
            self.skip_group()?;
            self.ty()?;
            GoType::Opaque("generic type")
        } else {
            if self.peek() == Some(&Tok::Punct('=')) {
                self.i += 1;
            }
            self.ty()?
        };
        pkg.types.insert(
            name,
            Decl {
                ty,
                imports: imports.clone(),
                markers,
            },
        );
        Ok(())
    }

    fn ty(&mut self) -> Result<GoType, String> {
        match self.next()?.clone() {
            Tok::Punct('*') => Ok(GoType::Ptr(Box::new(self.ty()?))),
            Tok::Punct('(') => {
                let t = self.ty()?;
                self.expect(')')?;
                Ok(t)
            }
            Tok::Punct('[') => {
                if self.peek() == Some(&Tok::Punct(']')) {
                    self.i += 1;
                    Ok(GoType::Slice(Box::new(self.ty()?)))
                } else {
                    while self.peek() != Some(&Tok::Punct(']')) {
                        self.next()?;
                    }
                    self.i += 1;
                    Ok(GoType::Array(Box::new(self.ty()?)))
                }
            }
            Tok::Ident(k) if k == "map" => {
                self.expect('[')?;
                let key = self.ty()?;
                self.expect(']')?;
                Ok(GoType::Map(Box::new(key), Box::new(self.ty()?)))
            }
            Tok::Ident(k) if k == "struct" => self.struct_body(),
            Tok::Ident(k) if k == "interface" => {
                self.skip_group()?;
                Ok(GoType::Opaque("interface"))
            }
            Tok::Ident(k) if k == "chan" => {
                self.ty()?;
                Ok(GoType::Opaque("chan"))
            }
            Tok::Ident(k) if k == "func" => {
                self.skip_group()?;
                match self.peek() {
                    Some(Tok::Punct('(')) => self.skip_group()?,
                    Some(Tok::Newline | Tok::Punct(';' | ')' | '}' | ',') | Tok::Str(_)) | None => {
                    }
                    _ => {
                        self.ty()?;
                    }
                }
                Ok(GoType::Opaque("func"))
            }
            Tok::Ident(a) => {
                if self.peek() == Some(&Tok::Punct('.')) {
                    self.i += 1;
                    let b = self.ident()?;
                    Ok(GoType::Named(Some(a), b))
                } else {
                    Ok(GoType::Named(None, a))
                }
            }
            other => Err(format!("unexpected {other:?} in a type")),
        }
    }

    fn struct_body(&mut self) -> Result<GoType, String> {
        self.expect('{')?;
        let mut fields = Vec::new();
        loop {
            self.skip_newlines();
            match self.peek().cloned() {
                Some(Tok::Punct('}')) => {
                    self.i += 1;
                    return Ok(GoType::Struct(fields));
                }
                Some(Tok::Punct('*')) => {
                    let ty = self.ty()?;
                    let name = type_name(&ty);
                    let tag = self.tag();
                    fields.push(GoField {
                        name,
                        embedded: true,
                        ty,
                        tag,
                    });
                }
                Some(Tok::Ident(a)) => match self.peek_at(1) {
                    Some(Tok::Punct('.')) => {
                        let ty = self.ty()?;
                        let tag = self.tag();
                        fields.push(GoField {
                            name: type_name(&ty),
                            embedded: true,
                            ty,
                            tag,
                        });
                    }
                    Some(Tok::Newline | Tok::Punct(';' | '}') | Tok::Str(_)) => {
                        self.i += 1;
                        let tag = self.tag();
                        fields.push(GoField {
                            name: a.clone(),
                            embedded: true,
                            ty: GoType::Named(None, a),
                            tag,
                        });
                    }
                    _ => {
                        let mut names = vec![self.ident()?];
                        while self.peek() == Some(&Tok::Punct(',')) {
                            self.i += 1;
                            names.push(self.ident()?);
                        }
                        let ty = self.ty()?;
                        let tag = self.tag();
                        for name in names {
                            fields.push(GoField {
                                name,
                                embedded: false,
                                ty: ty.clone(),
                                tag: tag.clone(),
                            });
                        }
                    }
                },
                other => return Err(format!("unexpected {other:?} in a struct")),
            }
        }
    }

    fn tag(&mut self) -> String {
        if let Some(Tok::Str(s)) = self.peek() {
            let s = s.clone();
            self.i += 1;
            s
        } else {
            String::new()
        }
    }
}

fn type_name(ty: &GoType) -> String {
    match ty {
        GoType::Named(_, n) => n.clone(),
        GoType::Ptr(t) => type_name(t),
        _ => String::new(),
    }
}

/// The value of `key` in a Go struct tag (`json:"name,omitempty" protobuf:"…"`).
pub fn tag_value<'a>(tag: &'a str, key: &str) -> Option<&'a str> {
    let mut rest = tag.trim();
    while !rest.is_empty() {
        let colon = rest.find(':')?;
        let k = rest[..colon].trim();
        let after = rest[colon + 1..].strip_prefix('"')?;
        let end = after.find('"')?;
        if k == key {
            return Some(&after[..end]);
        }
        rest = after[end + 1..].trim_start();
    }
    None
}
