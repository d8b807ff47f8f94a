#!/usr/bin/env python3
"""Generates a deterministic synthetic repository for Canopy benchmarks.

Mixed languages (Rust, Python, TypeScript, TSX, JavaScript, Go, Markdown, plus
a few config/text files), laid out like a monorepo of services and libraries,
with realistic-looking code: imports, doc comments, types, classes/impls,
methods that call one another and functions of other modules, error handling,
tests. The same --seed and --files always produce byte-identical output
(Python stdlib only; no wall-clock or hash-randomised state is used).

Usage: gen_repo.py [--files N] [--seed S] [--force] OUT_DIR
"""

import argparse
import os
import random
import shutil
import sys

WORDS = """
account action adapter address agent alert allocation analytics archive asset
audit backend balance batch billing blob bucket budget buffer build bundle cache
calendar campaign capacity cart catalog channel checkout claim client cluster
column comment config connection consumer contact container content context
contract counter coupon credential cursor customer dashboard datasource dataset
deadline delivery deployment device digest discount dispatch document domain
draft edge email endpoint entity envelope event export feature feed field filter
flag folder forecast gateway grant graph group handler header health history
host identity image import incident index inventory invoice issue item job
journal key label lease ledger limit listing locale lock log manifest mapping
member message metric migration mirror model monitor namespace node notice
notification offset order owner package page partition patch payload payment
peer permission pipeline plan policy pool port preference price principal
probe process product profile project promotion provider queue quota rate
receipt record refund region registry release replica report request resource
response retry revision role route rule runtime sample schedule schema scope
secret segment sequence session shard shipment signal snapshot source span
stage statement status storage stream subscription summary supplier table tag
task template tenant thread threshold ticket timeline token topic trace
transaction transfer trigger upload usage user variant vault vendor version
view volume voucher warehouse webhook window worker workflow workspace zone
""".split()

VERBS = """
apply build check collect compute create decode delete dispatch encode ensure
enqueue evaluate expire fetch filter find flush format handle hydrate index
insert invalidate load lookup merge normalize notify parse persist prepare
publish purge reconcile refresh register reload remove render replay resolve
restore retry rollback route sanitize save schedule scan serialize split start
stop submit sync track transform translate update upsert validate verify watch
""".split()

ADJ = """
active archived async batched cached cold compact default deferred dirty
durable expired external fast global hot idle inbound internal lazy legacy
local locked merged nested offline online outbound paged partial pending
primary private public raw readonly remote scoped secure shared signed stale
strict temporary trusted unique verified virtual
""".split()

SENTENCES = [
    "Returns {a} {n} for the given {n2}, or an error when it cannot be {vd}.",
    "The {n} is {vd} lazily on first access and kept until the {n2} expires.",
    "Callers must hold the {n2} lock; this is checked in debug builds only.",
    "This keeps the {a} {n} consistent with the {n2} stored upstream.",
    "Retries with exponential backoff when the {n2} is temporarily unavailable.",
    "See the {n} module for the wire format of the {n2}.",
    "Invariant: every {n} belongs to exactly one {n2}.",
    "Deprecated: use `{v}_{n}` instead; kept for the {a} clients.",
    "Runs in O(n) over the {n2} entries; large inputs are processed in pages.",
    "The result is {a} and may be shared between threads.",
]

LANG_WEIGHTS = [
    ("rust", 22), ("python", 22), ("typescript", 20), ("tsx", 5),
    ("javascript", 8), ("go", 13), ("markdown", 6), ("text", 4),
]


def snake(*parts):
    return "_".join(parts)


def camel(*parts):
    return parts[0] + "".join(p.capitalize() for p in parts[1:])


def pascal(*parts):
    return "".join(w.capitalize() for p in parts for w in p.split("_"))


def past(verb):
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y"):
        return verb[:-1] + "ied"
    return verb + "ed"


class Gen:
    def __init__(self, rng, module_names):
        self.r = rng
        self.modules = module_names  # list of (dir, module) for cross-module calls

    def word(self):
        return self.r.choice(WORDS)

    def verb(self):
        return self.r.choice(VERBS)

    def adj(self):
        return self.r.choice(ADJ)

    def sentence(self):
        v = self.verb()
        return self.r.choice(SENTENCES).format(
            a=self.adj(), n=self.word(), n2=self.word(), v=v, vd=past(v))

    def doc(self, k=None):
        k = k or self.r.randint(1, 3)
        return [self.sentence() for _ in range(k)]

    def ints(self):
        return self.r.randint(1, 9999)

    def other_module(self):
        return self.r.choice(self.modules)

    # ------------------------------------------------------------------ Rust
    def rust(self, mod):
        r = self.r
        out = []
        out.append("//! " + self.sentence())
        out.append("//!")
        out.append("//! " + self.sentence())
        out.append("")
        out.append("use std::collections::{BTreeMap, HashMap};")
        out.append("use std::sync::{Arc, Mutex};")
        out.append("use std::time::{Duration, Instant};")
        for _ in range(r.randint(1, 4)):
            d, m = self.other_module()
            out.append(f"use crate::{d.replace('/', '::')}::{m}::{{{pascal(self.word(), self.word())}, {snake(self.verb(), self.word())}}};")
        out.append("")
        consts = []
        for _ in range(r.randint(1, 3)):
            c = snake(self.adj(), self.word()).upper()
            consts.append(c)
            out.append(f"/// {self.sentence()}")
            out.append(f"pub const {c}: usize = {self.ints()};")
        out.append("")
        err = pascal(mod, "error")
        out.append("/// Errors raised while " + self.verb() + "ing a " + self.word() + ".")
        out.append("#[derive(Debug, Clone, PartialEq, Eq)]")
        out.append(f"pub enum {err} {{")
        for _ in range(r.randint(2, 5)):
            out.append(f"    /// {self.sentence()}")
            out.append(f"    {pascal(self.adj(), self.word())}(String),")
        out.append("}")
        out.append("")
        out.append(f"impl std::fmt::Display for {err} {{")
        out.append("    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {")
        out.append("        write!(f, \"{:?}\", self)")
        out.append("    }")
        out.append("}")
        out.append("")
        for _ in range(r.randint(1, 3)):
            st = pascal(self.adj(), self.word(), mod)
            fields = [(snake(self.word(), self.word()), r.choice(
                ["u64", "String", "Vec<u8>", "Option<String>", "HashMap<String, u64>",
                 "Arc<Mutex<Vec<String>>>", "Duration", "bool", "i32"])) for _ in range(r.randint(2, 6))]
            for line in self.doc():
                out.append(f"/// {line}")
            out.append("#[derive(Debug, Clone, Default)]")
            out.append(f"pub struct {st} {{")
            for fname, ftype in fields:
                out.append(f"    /// {self.sentence()}")
                out.append(f"    pub {fname}: {ftype},")
            out.append("}")
            out.append("")
            out.append(f"impl {st} {{")
            out.append(f"    /// Creates an empty {st}.")
            out.append("    pub fn new() -> Self {")
            out.append("        Self::default()")
            out.append("    }")
            methods = []
            for _ in range(r.randint(2, 6)):
                mname = snake(self.verb(), self.word())
                while mname in methods:
                    mname = snake(self.verb(), self.word(), self.word())
                methods.append(mname)
                out.append("")
                for line in self.doc():
                    out.append(f"    /// {line}")
                arg = snake(self.word())
                out.append(f"    pub fn {mname}(&mut self, {arg}: &str, limit: usize) -> Result<u64, {err}> {{")
                out.append("        let started = Instant::now();")
                out.append("        let mut total: u64 = 0;")
                out.append(f"        let mut seen: BTreeMap<String, usize> = BTreeMap::new();")
                out.append(f"        for (i, part) in {arg}.split(',').enumerate().take(limit) {{")
                out.append("            if part.is_empty() {")
                out.append(f"                return Err({err}::{pascal(self.adj(), self.word())}(format!(\"empty part {{i}}\")));")
                out.append("            }")
                out.append("            *seen.entry(part.to_string()).or_insert(0) += 1;")
                out.append(f"            total += part.len() as u64 * {r.choice(consts)} as u64;")
                out.append("        }")
                if methods[:-1]:
                    out.append(f"        if total > {self.ints()} {{")
                    out.append(f"            total = total.saturating_sub(self.{r.choice(methods[:-1])}({arg}, limit / 2)?);")
                    out.append("        }")
                d, m = self.other_module()
                out.append(f"        let _ = {snake(self.verb(), self.word())}(&seen);")
                out.append(f"        tracing::debug!(elapsed = ?started.elapsed(), \"{mname} done\");")
                out.append("        Ok(total)")
                out.append("    }")
            out.append("}")
            out.append("")
        for _ in range(r.randint(1, 4)):
            fname = snake(self.verb(), self.adj(), self.word())
            for line in self.doc():
                out.append(f"/// {line}")
            out.append(f"pub fn {fname}(items: &[String]) -> HashMap<String, usize> {{")
            out.append("    let mut counts = HashMap::with_capacity(items.len());")
            out.append("    for item in items {")
            out.append("        let key = item.trim().to_lowercase();")
            out.append(f"        if key.starts_with(\"{self.word()}\") {{")
            out.append("            continue;")
            out.append("        }")
            out.append("        *counts.entry(key).or_insert(0) += 1;")
            out.append("    }")
            out.append("    counts")
            out.append("}")
            out.append("")
        out.append("#[cfg(test)]")
        out.append("mod tests {")
        out.append("    use super::*;")
        for _ in range(r.randint(1, 3)):
            out.append("")
            out.append("    #[test]")
            out.append(f"    fn {snake(self.verb(), 'handles', self.adj(), self.word())}() {{")
            out.append(f"        let items = vec![\"{self.word()}\".to_string(), \"{self.word()}\".to_string()];")
            out.append(f"        assert_eq!(items.len(), 2);")
            out.append("    }")
        out.append("}")
        return "\n".join(out) + "\n"

    # ---------------------------------------------------------------- Python
    def python(self, mod):
        r = self.r
        out = ['"""' + self.sentence(), "", self.sentence(), '"""', ""]
        out.append("from __future__ import annotations")
        out.append("")
        out.append("import logging")
        out.append("from dataclasses import dataclass, field")
        out.append("from typing import Any, Iterable, Optional")
        out.append("")
        for _ in range(r.randint(1, 4)):
            d, m = self.other_module()
            out.append(f"from {d.replace('/', '.')}.{m} import {pascal(self.word(), self.word())}, {snake(self.verb(), self.word())}")
        out.append("")
        out.append("logger = logging.getLogger(__name__)")
        out.append("")
        consts = []
        for _ in range(r.randint(1, 3)):
            c = snake(self.adj(), self.word()).upper()
            consts.append(c)
            out.append(f"{c} = {self.ints()}")
        out.append("")
        out.append("")
        err = pascal(mod, "error")
        out.append(f"class {err}(Exception):")
        out.append(f'    """{self.sentence()}"""')
        out.append("")
        out.append("")
        for _ in range(r.randint(1, 3)):
            cls = pascal(self.adj(), self.word(), mod)
            if r.random() < 0.5:
                out.append("@dataclass")
                out.append(f"class {cls}:")
                out.append(f'    """{self.sentence()}"""')
                out.append("")
                for _ in range(r.randint(2, 5)):
                    out.append(f"    {snake(self.word(), self.word())}: {r.choice(['int', 'str', 'Optional[str]', 'float', 'bool'])} = {r.choice(['0', 'None', repr(self.word()), 'False', '1.0'])}")
                out.append(f"    tags: list[str] = field(default_factory=list)")
            else:
                out.append(f"class {cls}:")
                out.append(f'    """{self.sentence()}')
                out.append("")
                out.append(f"    {self.sentence()}")
                out.append('    """')
                out.append("")
                out.append(f"    def __init__(self, {self.word()}_id: int, name: str = {repr(self.word())}) -> None:")
                out.append("        self.name = name")
                out.append("        self._cache: dict[str, Any] = {}")
                out.append("        self._pending: list[str] = []")
            methods = []
            for _ in range(r.randint(2, 6)):
                mname = snake(self.verb(), self.word())
                while mname in methods:
                    mname = snake(self.verb(), self.word(), self.word())
                methods.append(mname)
                out.append("")
                if r.random() < 0.2:
                    out.append("    @property")
                    out.append(f"    def {mname}(self) -> int:")
                    out.append(f'        """{self.sentence()}"""')
                    out.append(f"        return len(self.__dict__) * {r.choice(consts)}")
                    continue
                arg = snake(self.word(), "items")
                out.append(f"    def {mname}(self, {arg}: Iterable[str], limit: int = {r.choice(consts)}) -> dict[str, int]:")
                out.append(f'        """{self.sentence()}')
                out.append("")
                out.append("        Args:")
                out.append(f"            {arg}: {self.sentence()}")
                out.append(f"            limit: {self.sentence()}")
                out.append('        """')
                out.append("        result: dict[str, int] = {}")
                out.append(f"        for index, item in enumerate({arg}):")
                out.append("            if index >= limit:")
                out.append(f"                logger.warning(\"{mname}: limit %d reached\", limit)")
                out.append("                break")
                out.append("            if not item:")
                out.append(f"                raise {err}(f\"empty {self.word()} at {{index}}\")")
                out.append("            result[item] = result.get(item, 0) + len(item)")
                out.append(f"        {snake(self.verb(), self.word())}(result)")
                out.append("        return result")
            out.append("")
            out.append("")
        for _ in range(r.randint(1, 4)):
            fname = snake(self.verb(), self.adj(), self.word())
            out.append(f"def {fname}(records: list[dict[str, Any]], *, strict: bool = False) -> list[str]:")
            out.append(f'    """{self.sentence()}"""')
            out.append("    keys: list[str] = []")
            out.append("    for record in records:")
            out.append(f"        value = record.get({repr(self.word())})")
            out.append("        if value is None:")
            out.append("            if strict:")
            out.append(f"                raise {err}(\"missing {self.word()}\")")
            out.append("            continue")
            out.append("        keys.append(str(value).strip().lower())")
            out.append("    return sorted(set(keys))")
            out.append("")
            out.append("")
        return "\n".join(out).rstrip() + "\n"

    # ------------------------------------------------------------ TypeScript
    def typescript(self, mod, tsx=False):
        r = self.r
        out = [f"/**", f" * {self.sentence()}", f" * @module {mod}", " */", ""]
        for _ in range(r.randint(1, 4)):
            d, m = self.other_module()
            out.append(f"import {{ {pascal(self.word(), self.word())}, {camel(self.verb(), self.word())} }} from \"../../{d}/{m}\";")
        if tsx:
            out.append("import React, { useEffect, useState } from \"react\";")
        out.append("")
        consts = []
        for _ in range(r.randint(1, 3)):
            c = snake(self.adj(), self.word()).upper()
            consts.append(c)
            out.append(f"export const {c} = {self.ints()};")
        out.append("")
        for _ in range(r.randint(1, 2)):
            iface = pascal(self.word(), mod, "options")
            out.append(f"/** {self.sentence()} */")
            out.append(f"export interface {iface} {{")
            for _ in range(r.randint(2, 6)):
                out.append(f"  /** {self.sentence()} */")
                out.append(f"  {camel(self.word(), self.word())}{r.choice(['', '?'])}: {r.choice(['string', 'number', 'boolean', 'string[]', 'Record<string, number>', 'Date'])};")
            out.append("}")
            out.append("")
        out.append(f"export type {pascal(mod, 'state')} = {' | '.join(repr(self.adj()).replace(chr(39), chr(34)) for _ in range(3))};")
        out.append("")
        for _ in range(r.randint(1, 3)):
            cls = pascal(self.adj(), self.word(), mod)
            out.append(f"/**")
            for line in self.doc():
                out.append(f" * {line}")
            out.append(" */")
            out.append(f"export class {cls} {{")
            out.append(f"  private readonly cache = new Map<string, number>();")
            out.append(f"  private pending: string[] = [];")
            out.append("")
            out.append(f"  constructor(private readonly name: string, private limit = {r.choice(consts)}) {{}}")
            methods = []
            for _ in range(r.randint(2, 6)):
                mname = camel(self.verb(), self.word())
                while mname in methods:
                    mname = camel(self.verb(), self.word(), self.word())
                methods.append(mname)
                out.append("")
                out.append(f"  /** {self.sentence()} */")
                is_async = r.random() < 0.4
                ret = "Promise<number>" if is_async else "number"
                out.append(f"  {'async ' if is_async else ''}{mname}(items: readonly string[], strict = false): {ret} {{")
                out.append("    let total = 0;")
                out.append("    for (const [index, item] of items.entries()) {")
                out.append("      if (index >= this.limit) {")
                out.append("        break;")
                out.append("      }")
                out.append("      if (!item && strict) {")
                out.append(f"        throw new Error(`{mname}: empty {self.word()} at ${{index}}`);")
                out.append("      }")
                out.append("      const seen = this.cache.get(item) ?? 0;")
                out.append("      this.cache.set(item, seen + 1);")
                out.append(f"      total += item.length * {r.choice(consts)};")
                out.append("    }")
                if is_async:
                    out.append(f"    await {camel(self.verb(), self.word())}(this.name);")
                else:
                    out.append(f"    {camel(self.verb(), self.word())}(this.name);")
                out.append("    return total;")
                out.append("  }")
            out.append("}")
            out.append("")
        for _ in range(r.randint(1, 3)):
            fname = camel(self.verb(), self.adj(), self.word())
            out.append(f"/** {self.sentence()} */")
            out.append(f"export function {fname}(records: Array<Record<string, unknown>>): string[] {{")
            out.append(f"  return records")
            out.append(f"    .map((record) => record[\"{self.word()}\"])")
            out.append(f"    .filter((value): value is string => typeof value === \"string\")")
            out.append(f"    .map((value) => value.trim().toLowerCase())")
            out.append(f"    .sort();")
            out.append("}")
            out.append("")
        out.append(f"export const {camel(self.verb(), mod)} = (input: string): number => input.split(\",\").length;")
        if tsx:
            comp = pascal(self.word(), mod, "panel")
            out.append("")
            out.append(f"export function {comp}({{ title }}: {{ title: string }}) {{")
            out.append("  const [items, setItems] = useState<string[]>([]);")
            out.append("  useEffect(() => {")
            out.append(f"    setItems([\"{self.word()}\", \"{self.word()}\"]);")
            out.append("  }, []);")
            out.append("  return (")
            out.append("    <section className=\"panel\">")
            out.append("      <h2>{title}</h2>")
            out.append("      <ul>")
            out.append("        {items.map((item) => (")
            out.append("          <li key={item}>{item}</li>")
            out.append("        ))}")
            out.append("      </ul>")
            out.append("    </section>")
            out.append("  );")
            out.append("}")
        return "\n".join(out).rstrip() + "\n"

    # ------------------------------------------------------------ JavaScript
    def javascript(self, mod):
        r = self.r
        out = ["\"use strict\";", "", f"/** {self.sentence()} */", ""]
        for _ in range(r.randint(1, 3)):
            d, m = self.other_module()
            out.append(f"const {{ {camel(self.verb(), self.word())} }} = require(\"../../{d}/{m}\");")
        out.append("")
        names = []
        for _ in range(r.randint(2, 6)):
            fname = camel(self.verb(), self.adj(), self.word())
            names.append(fname)
            out.append("/**")
            for line in self.doc():
                out.append(f" * {line}")
            out.append(" * @param {Array<object>} records")
            out.append(" * @returns {number}")
            out.append(" */")
            out.append(f"function {fname}(records, options = {{}}) {{")
            out.append("  let total = 0;")
            out.append("  for (const record of records) {")
            out.append(f"    if (record.{camel(self.word(), 'id')} == null) {{")
            out.append("      continue;")
            out.append("    }")
            out.append(f"    total += (record.{self.word()} || 0) * (options.weight || {self.ints()});")
            out.append("  }")
            out.append("  return total;")
            out.append("}")
            out.append("")
        cls = pascal(self.word(), mod)
        out.append(f"class {cls} {{")
        out.append("  constructor(name) {")
        out.append("    this.name = name;")
        out.append("    this.items = [];")
        out.append("  }")
        for _ in range(r.randint(1, 4)):
            out.append("")
            out.append(f"  {camel(self.verb(), self.word())}(item) {{")
            out.append("    this.items.push(item);")
            out.append(f"    return {r.choice(names)}(this.items);")
            out.append("  }")
        out.append("}")
        out.append("")
        out.append(f"module.exports = {{ {', '.join(names + [cls])} }};")
        return "\n".join(out) + "\n"

    # -------------------------------------------------------------------- Go
    def go(self, mod):
        r = self.r
        pkg = mod.replace("_", "")
        out = [f"// Package {pkg} {self.sentence()[0].lower() + self.sentence()[1:]}", f"package {pkg}", ""]
        out.append("import (")
        out.append('\t"context"')
        out.append('\t"errors"')
        out.append('\t"fmt"')
        out.append('\t"strings"')
        out.append('\t"sync"')
        out.append('\t"time"')
        out.append(")")
        out.append("")
        consts = []
        out.append("const (")
        for _ in range(r.randint(1, 3)):
            c = camel(self.adj(), self.word())
            consts.append(c)
            out.append(f"\t// {c} {self.sentence()[0].lower() + self.sentence()[1:]}")
            out.append(f"\t{c} = {self.ints()}")
        out.append(")")
        out.append("")
        errv = "Err" + pascal(self.adj(), self.word())
        out.append(f"// {errv} is returned when the {self.word()} is invalid.")
        out.append(f"var {errv} = errors.New(\"{mod}: invalid {self.word()}\")")
        out.append("")
        for _ in range(r.randint(1, 3)):
            st = pascal(self.adj(), self.word())
            out.append(f"// {st} {self.sentence()[0].lower() + self.sentence()[1:]}")
            out.append(f"type {st} struct {{")
            out.append("\tmu    sync.Mutex")
            for _ in range(r.randint(2, 5)):
                out.append(f"\t{pascal(self.word(), self.word())} {r.choice(['string', 'int64', 'time.Duration', '[]string', 'map[string]int', 'bool'])}")
            out.append("}")
            out.append("")
            out.append(f"// New{st} creates a {st}.")
            out.append(f"func New{st}() *{st} {{")
            out.append(f"\treturn &{st}{{}}")
            out.append("}")
            for _ in range(r.randint(2, 5)):
                mname = pascal(self.verb(), self.word())
                out.append("")
                out.append(f"// {mname} {self.sentence()[0].lower() + self.sentence()[1:]}")
                out.append(f"func (s *{st}) {mname}(ctx context.Context, items []string) (int, error) {{")
                out.append("\ts.mu.Lock()")
                out.append("\tdefer s.mu.Unlock()")
                out.append("\ttotal := 0")
                out.append("\tfor i, item := range items {")
                out.append("\t\tselect {")
                out.append("\t\tcase <-ctx.Done():")
                out.append("\t\t\treturn total, ctx.Err()")
                out.append("\t\tdefault:")
                out.append("\t\t}")
                out.append("\t\tif strings.TrimSpace(item) == \"\" {")
                out.append(f"\t\t\treturn 0, fmt.Errorf(\"{mname} item %d: %w\", i, {errv})")
                out.append("\t\t}")
                out.append(f"\t\ttotal += len(item) * {r.choice(consts)}")
                out.append("\t}")
                out.append(f"\t_ = time.Since(time.Now())")
                out.append("\treturn total, nil")
                out.append("}")
            out.append("")
        return "\n".join(out).rstrip() + "\n"

    # -------------------------------------------------------------- Markdown
    def markdown(self, mod):
        r = self.r
        out = [f"# {pascal(mod)}", "", " ".join(self.doc(3)), ""]
        for _ in range(r.randint(2, 6)):
            out.append(f"## {self.verb().capitalize()} {self.adj()} {self.word()}s")
            out.append("")
            out.append(" ".join(self.doc(r.randint(2, 5))))
            out.append("")
            if r.random() < 0.5:
                out.append("```bash")
                out.append(f"{mod} {self.verb()} --{self.word()} {self.ints()}")
                out.append("```")
                out.append("")
            for _ in range(r.randint(0, 4)):
                out.append(f"- `{snake(self.verb(), self.word())}`: {self.sentence()}")
            out.append("")
        return "\n".join(out).rstrip() + "\n"

    def text(self, mod):
        r = self.r
        kind = r.choice(["toml", "yaml", "json", "txt"])
        if kind == "toml":
            out = [f"[{mod}]"] + [f"{snake(self.word(), self.word())} = {self.ints()}" for _ in range(r.randint(5, 30))]
        elif kind == "yaml":
            out = [f"{mod}:"] + [f"  {snake(self.word(), self.word())}: {self.adj()}" for _ in range(r.randint(5, 30))]
        elif kind == "json":
            items = [f'  "{camel(self.word(), self.word())}": {self.ints()}' for _ in range(r.randint(5, 30))]
            out = ["{", ",\n".join(items), "}"]
        else:
            out = [self.sentence() for _ in range(r.randint(5, 30))]
        return kind, "\n".join(out) + "\n"


EXT = {"rust": "rs", "python": "py", "typescript": "ts", "tsx": "tsx",
       "javascript": "js", "go": "go", "markdown": "md"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--force", action="store_true", help="replace OUT if it exists")
    args = ap.parse_args()

    if os.path.exists(args.out):
        if not args.force and os.listdir(args.out):
            sys.exit(f"{args.out} exists and is not empty (use --force)")
        shutil.rmtree(args.out)
    rng = random.Random(args.seed)

    # A monorepo: top-level areas, each with packages, each with modules.
    areas = ["services", "libs", "tools", "web", "platform"]
    dirs = []
    n_dirs = max(8, args.files // 12)
    used = set()
    while len(dirs) < n_dirs:
        d = f"{rng.choice(areas)}/{rng.choice(WORDS)}_{rng.choice(WORDS)}"
        if d not in used:
            used.add(d)
            dirs.append(d)
    langs = [l for l, _ in LANG_WEIGHTS]
    weights = [w for _, w in LANG_WEIGHTS]

    plan = []  # (dir, module, lang)
    names = set()
    for _ in range(args.files):
        while True:
            d = rng.choice(dirs)
            m = f"{rng.choice(VERBS)}_{rng.choice(WORDS)}"
            lang = rng.choices(langs, weights)[0]
            if (d, m, lang) not in names:
                names.add((d, m, lang))
                break
        plan.append((d, m, lang))

    module_refs = [(d, m) for d, m, _ in plan[: min(len(plan), 400)]]
    gen = Gen(rng, module_refs)
    total = 0
    for d, m, lang in plan:
        if lang == "text":
            kind, body = gen.text(m)
            path = os.path.join(args.out, d, f"{m}.{kind}")
        else:
            body = getattr(gen, "typescript" if lang == "tsx" else lang)(m, *([True] if lang == "tsx" else []))
            path = os.path.join(args.out, d, f"{m}.{EXT[lang]}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(body)
        total += len(body.encode())
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write(f"# Synthetic repository\n\nGenerated by bench/gen_repo.py --files {args.files} --seed {args.seed}.\n")
    with open(os.path.join(args.out, ".gitignore"), "w") as f:
        f.write("target/\nnode_modules/\n__pycache__/\n")
    print(f"gen_repo: wrote {args.files + 2} files, {total / 1e6:.1f} MB to {args.out}")


if __name__ == "__main__":
    main()
