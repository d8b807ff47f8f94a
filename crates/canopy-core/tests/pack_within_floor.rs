//! The floor of the within-file ranking (`CANOPY_PACK_TUNING=within=W,share=S,floor=F`):
//! a unit whose own name holds only a small share of the question's words
//! must not take a slot of its file from a sibling the ranking put above it.
//! Its own test binary: the knob is an environment variable, and no other
//! test may run while it is set.

use canopy_test_support::repo::write;

use canopy_core::index::NoProgress;
use canopy_core::pack::EvidencePack;
use canopy_core::{Engine, EngineOptions};

mod pack_knobs;

/// `_check_list_display_item` and `_check_list_display_links` hold the
/// question's words in their bodies; `_check_radio_fields_key` ranks just
/// below them and holds one word of the question ("fields") in its
/// four-word name.
const CHECKS: &str = "class ModelAdminChecks:
    \"\"\"Checks of a model admin's options.\"\"\"

    def _check_list_display_item(self, obj, item, label):
        \"\"\"An item accessible only via an instance of the model, such as a descriptor field, raises admin.E108 when the getattr on the model class fails.\"\"\"
        if callable(item) or hasattr(obj, item):
            return []
        try:
            field = obj.model._meta.get_field(item)
        except Exception:
            return [Error(\"The value of '%s' refers to '%s'.\" % (label, item), id=\"admin.E108\")]
        return []

    def _check_list_display_links(self, obj, item, label):
        \"\"\"A link to fields accessible only via an instance raises admin.E108 too: the item must be one of the names in list_display, in the same order.\"\"\"
        if item not in obj.list_display:
            return [Error(\"The value of '%s' refers to '%s'.\" % (label, item), id=\"admin.E111\")]
        return []

    def _check_radio_fields_key(self, obj, field_name, label):
        \"\"\"A key of radio_fields must name a model attribute accessible only on the class: else admin.E022 is raised.\"\"\"
        try:
            field = obj.model._meta.get_field(field_name)
        except Exception:
            return [Error(\"The value of '%s' refers to '%s'.\" % (label, field_name), id=\"admin.E022\")]
        return []
";

const OPTIONS: &str = "class ModelAdmin:
    \"\"\"Options of a model in the admin: list_display, radio_fields, ordering.\"\"\"

    list_display = (\"__str__\",)
    radio_fields = {}

    def get_list_display(self, request):
        \"\"\"The fields shown on the change list: list_display.\"\"\"
        return self.list_display
";

/// A query an agent would type for an issue titled "admin.E108 is raised on
/// fields accessible only via instance".
const QUESTION: &str = "admin.E108 raised fields accessible only instance";

fn names(p: &EvidencePack) -> Vec<String> {
    p.handles
        .iter()
        .map(|h| h.qualified_name.clone().unwrap_or_default())
        .collect()
}

fn pack_with(e: &Engine, knob: &str) -> EvidencePack {
    // SAFETY: this binary holds this one test, so no other thread reads the
    // environment while it changes.
    unsafe { std::env::set_var("CANOPY_PACK_TUNING", knob) };
    let pack = pack_knobs::pack_for(e, QUESTION);
    unsafe { std::env::remove_var("CANOPY_PACK_TUNING") };
    pack
}

#[test]
fn a_weak_name_match_does_not_take_a_better_sibling_s_slot() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(r, "admin/checks.py", CHECKS);
    write(r, "admin/options.py", OPTIONS);
    let e = Engine::open(r, EngineOptions::default()).unwrap();
    e.index(None, &NoProgress).unwrap();
    let links = "ModelAdminChecks._check_list_display_links".to_string();
    let radio = "ModelAdminChecks._check_radio_fields_key".to_string();

    // The ranking shows the two list_display checks and not the radio check.
    let off = pack_with(&e, "within=0");
    assert!(names(&off).contains(&links), "{:?}", names(&off));
    assert!(!names(&off).contains(&radio), "{:?}", names(&off));

    // Without a floor, one word of four lifts the radio check into the
    // file's slot of the links check, which the ranking put above it.
    let plain = pack_with(&e, "within=0.4");
    assert!(names(&plain).contains(&radio), "{:?}", names(&plain));
    assert!(!names(&plain).contains(&links), "{:?}", names(&plain));

    // With the floor the weak match counts for nothing here, and the pack
    // equals the ranking's, guidance included.
    for knob in ["within=0.4,share=0.3", "within=0.4,share=0.5"] {
        let floored = pack_with(&e, knob);
        assert_eq!(names(&floored), names(&off), "{knob}");
        assert_eq!(floored.guidance, off.guidance, "{knob}");
    }
    // A floor on the score lets it break only a near tie: the radio check
    // scores above 0.8 of the file's best, not above 0.95.
    let near = pack_with(&e, "within=0.4,share=0.5,floor=0.8");
    assert!(names(&near).contains(&radio), "{:?}", names(&near));
    let far = pack_with(&e, "within=0.4,share=0.5,floor=0.95");
    assert_eq!(names(&far), names(&off));
}
