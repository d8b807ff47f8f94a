; Canopy extraction rules for Python (tags-query capture names; see lang/extract.rs).

; ---- definitions ----------------------------------------------------------
(class_definition name: (identifier) @name) @definition.class
(function_definition name: (identifier) @name) @definition.function
; Module-level UPPER_CASE assignments are constants.
(module
  (expression_statement
    (assignment left: (identifier) @name)) @definition.constant
  (#match? @name "^_*[A-Z][A-Z0-9_]*$"))

; ---- calls ----------------------------------------------------------------
(call function: (identifier) @name) @reference.call
(call function: (attribute object: (_) @qualifier attribute: (identifier) @name)) @reference.call

; ---- imports --------------------------------------------------------------
(import_statement name: (dotted_name) @name) @reference.import
(import_statement name: (aliased_import name: (dotted_name) @name)) @reference.import
(import_from_statement
  module_name: (_) @qualifier
  name: (dotted_name) @name) @reference.import
(import_from_statement
  module_name: (_) @qualifier
  name: (aliased_import name: (dotted_name) @name)) @reference.import
(import_from_statement
  module_name: (_) @qualifier
  (wildcard_import) @name) @reference.import

; ---- type references (annotations and base classes) -----------------------
(type (identifier) @name) @reference.type
(type (attribute object: (_) @qualifier attribute: (identifier) @name)) @reference.type
(generic_type (identifier) @name) @reference.type
(class_definition
  superclasses: (argument_list (identifier) @name) @reference.type)
(class_definition
  superclasses: (argument_list
    (attribute object: (_) @qualifier attribute: (identifier) @name) @reference.type))
