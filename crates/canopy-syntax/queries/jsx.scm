; JSX rules, appended for .js/.jsx (the JavaScript grammar parses JSX) and .tsx.

; Rendering a component (`<Button />`, `<UI.Panel>`) calls it; lower-case
; intrinsic elements (`<div>`) are not references.
((jsx_opening_element name: (identifier) @name) @reference.call
  (#match? @name "^[A-Z]"))
((jsx_self_closing_element name: (identifier) @name) @reference.call
  (#match? @name "^[A-Z]"))
(jsx_opening_element
  name: (member_expression object: (_) @qualifier property: (property_identifier) @name)) @reference.call
(jsx_self_closing_element
  name: (member_expression object: (_) @qualifier property: (property_identifier) @name)) @reference.call
