; Canopy extraction rules for Rust (tags-query capture names; see lang/extract.rs).

; ---- definitions ----------------------------------------------------------
(struct_item name: (type_identifier) @name) @definition.struct
(union_item name: (type_identifier) @name) @definition.struct
(enum_item name: (type_identifier) @name) @definition.enum
(trait_item name: (type_identifier) @name) @definition.trait
(type_item name: (type_identifier) @name) @definition.type
; A trait's associated type with a bound (`type Config: Config;`): what
; `Self::Config` names in the trait, a value of one of the bound's types.
(associated_type name: (type_identifier) @name bounds: (trait_bounds)) @definition.type
(function_item name: (identifier) @name) @definition.function
(function_signature_item name: (identifier) @name) @definition.function
(mod_item name: (identifier) @name) @definition.module
(macro_definition name: (identifier) @name) @definition.macro
(const_item name: (identifier) @name) @definition.constant
(static_item name: (identifier) @name) @definition.constant

; `impl Trait for Type`: named after the type, the trait kept apart. A
; trait implemented on a primitive (`impl Float for f32`) is named after it
; too, so `f32::pow10()` and `Self::exponent_limit()` inside it find its
; methods rather than free functions of the same name.
(impl_item
  trait: (_) @trait
  type: [
    (type_identifier) @name
    (primitive_type) @name
    (generic_type type: (type_identifier) @name)
    (scoped_type_identifier name: (type_identifier) @name)
    (generic_type type: (scoped_type_identifier name: (type_identifier) @name))
    (reference_type type: (type_identifier) @name)
    (reference_type type: (generic_type type: (type_identifier) @name))
  ]) @definition.impl
(impl_item
  !trait
  type: [
    (type_identifier) @name
    (generic_type type: (type_identifier) @name)
    (scoped_type_identifier name: (type_identifier) @name)
    (generic_type type: (scoped_type_identifier name: (type_identifier) @name))
    (reference_type type: (type_identifier) @name)
    (reference_type type: (generic_type type: (type_identifier) @name))
  ]) @definition.impl

; ---- calls ----------------------------------------------------------------
(call_expression function: (identifier) @name) @reference.call
(call_expression
  function: (field_expression value: (_) @qualifier field: (field_identifier) @name)) @reference.call
(call_expression
  function: (scoped_identifier path: (_) @qualifier name: (identifier) @name)) @reference.call
(call_expression
  function: (generic_function function: (identifier) @name)) @reference.call
(call_expression
  function: (generic_function
    function: (field_expression value: (_) @qualifier field: (field_identifier) @name))) @reference.call
(call_expression
  function: (generic_function
    function: (scoped_identifier path: (_) @qualifier name: (identifier) @name))) @reference.call
(macro_invocation macro: (identifier) @name) @reference.call
(macro_invocation macro: (scoped_identifier path: (_) @qualifier name: (identifier) @name)) @reference.call

; Calls inside macro arguments (`format!("{}", self.greet())`), which
; tree-sitter keeps as unparsed token trees: `f(…)`, `a.f(…)`, `a::f(…)` and
; `a.b.f(…)`. The longest qualifier wins.
(token_tree
  (identifier) @name .
  (token_tree "(")) @reference.call
(token_tree
  [(identifier) (self) (crate) (super) (metavariable)] @qualifier .
  ["." "::"] .
  (identifier) @name .
  (token_tree "(")) @reference.call
(token_tree
  [(identifier) (self) (crate) (super) (metavariable)] @qualifier .
  ["." "::"] .
  (identifier) @qualifier .
  ["." "::"] .
  (identifier) @name .
  (token_tree "(")) @reference.call

; ---- imports --------------------------------------------------------------
; An import's name is its last path segment; `@qualifier`s of nested `use`
; lists join into the full path (`use std::{io::{Read}}` → `std::io::Read`).
(use_declaration argument: [(identifier) (scoped_identifier)] @name) @reference.import
(use_declaration argument: (use_as_clause path: (_) @name)) @reference.import
(use_declaration argument: (use_wildcard (_) @qualifier "*" @name)) @reference.import
(scoped_use_list
  path: (_) @qualifier
  list: (use_list [(identifier) (scoped_identifier)] @name)) @reference.import
(scoped_use_list
  path: (_) @qualifier
  list: (use_list (use_as_clause path: (_) @name))) @reference.import
(scoped_use_list
  path: (_) @qualifier
  list: (use_list (use_wildcard (_)? @qualifier "*" @name))) @reference.import
; `use std::io::{self, Read}` imports `std::io` itself.
(scoped_use_list path: (_) @name list: (use_list (self))) @reference.import
; One level of nesting: `use std::{fmt, io::{self, Read}}`.
(scoped_use_list
  path: (_) @qualifier
  list: (use_list
    (scoped_use_list
      path: (_) @qualifier
      list: (use_list [(identifier) (scoped_identifier)] @name)))) @reference.import
(scoped_use_list
  path: (_) @qualifier
  list: (use_list
    (scoped_use_list
      path: (_) @qualifier
      list: (use_list (use_as_clause path: (_) @name))))) @reference.import
(scoped_use_list
  path: (_) @qualifier
  list: (use_list
    (scoped_use_list
      path: (_) @qualifier
      list: (use_list (use_wildcard (_)? @qualifier "*" @name))))) @reference.import
(scoped_use_list
  path: (_) @qualifier
  list: (use_list
    (scoped_use_list path: (_) @name list: (use_list (self))))) @reference.import

; ---- type references ------------------------------------------------------
(scoped_type_identifier path: (_) @qualifier name: (type_identifier) @name) @reference.type
((type_identifier) @name @reference.type
  (#not-eq? @name "Self"))

; Generic parameters are local to their item: `T` is no type reference.
(_
  type_parameters: (type_parameters
    (type_parameter name: (type_identifier) @local.definition))) @local.scope
