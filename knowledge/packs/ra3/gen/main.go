// Command gen generates the built-in RA3 knowledge sets (sets/ra3.json and
// sets/ra3-corona.json) from sourced data, so that the sets never say more than the
// sources do:
//
//   - gen/assets.json: sourced RA3 object data (asset names, names, kinds, tags,
//     notes, special powers, maps), a copy of the project's fixture;
//   - gen/zh.json: the Chinese rendering of each asset's and map's notes and of the
//     special powers (hand-written; every asset must have a key, "" = no note);
//   - gen/rules.json: the global rule entries (hand-written, set format).
//
// Run from the repository root:
//
//	go run ./knowledge/packs/ra3/gen            # rewrite the sets
//	go run ./knowledge/packs/ra3/gen -check     # exit 1 when they are stale
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/factgate/factgate/knowledge"
)

func main() {
	dir := flag.String("dir", "knowledge/packs/ra3", "the RA3 pack folder (holds gen/ and sets/)")
	check := flag.Bool("check", false, "only check that the committed sets are up to date")
	flag.Parse()
	if err := run(*dir, *check); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(dir string, check bool) error {
	out, err := generateFromDir(dir)
	if err != nil {
		return err
	}
	for _, name := range setNames {
		path := filepath.Join(dir, "sets", name+".json")
		if check {
			have, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if !bytes.Equal(have, out[name]) {
				return fmt.Errorf("%s is stale: run go run ./knowledge/packs/ra3/gen", path)
			}
			continue
		}
		if err := os.WriteFile(path, out[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// generateFromDir reads the generator's inputs under dir/gen.
func generateFromDir(dir string) (map[string][]byte, error) {
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, "gen", name)) }
	assets, err := read("assets.json")
	if err != nil {
		return nil, err
	}
	zh, err := read("zh.json")
	if err != nil {
		return nil, err
	}
	rules, err := read("rules.json")
	if err != nil {
		return nil, err
	}
	return generate(assets, zh, rules)
}

// The sets and the factions each holds (assets.json faction keys, in render order).
var (
	setNames     = []string{"ra3", "ra3-corona"}
	setFactions  = map[string][]string{"ra3": {"Allied", "Soviet", "Japan"}, "ra3-corona": {"Allied", "Soviet", "Japan", "Celestial"}}
	factionNames = map[string]string{"Allied": "盟军", "Soviet": "苏联", "Japan": "帝国", "Celestial": "神州"}
)

type assetData struct {
	Factions map[string]struct {
		Zh      string   `json:"zh"`
		Objects []object `json:"objects"`
	} `json:"factions"`
	SpecialPowers []struct {
		Name   string   `json:"name"`
		UsedBy []string `json:"used_by"`
	} `json:"special_powers"`
	Maps []struct {
		ID string `json:"id"`
	} `json:"maps"`
}

type object struct {
	Asset  string   `json:"asset"`
	NameEn *string  `json:"name_en"`
	NameZh *string  `json:"name_zh"`
	Kind   string   `json:"kind"`
	Cost   *int     `json:"cost"`
	Tags   []string `json:"tags"`
}

type zhData struct {
	Names  map[string]string `json:"names"`
	Powers map[string]string `json:"powers"`
	Assets map[string]string `json:"assets"`
	Maps   map[string]string `json:"maps"`
}

func decodeStrict(data []byte, v any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// generate builds the set files from the inputs.
func generate(assetsJSON, zhJSON, rulesJSON []byte) (map[string][]byte, error) {
	var data assetData
	// assets.json carries more fields than the sets use (sources, notes); read it
	// leniently, the Chinese notes strictly.
	if err := json.Unmarshal(assetsJSON, &data); err != nil {
		return nil, fmt.Errorf("assets.json: %w", err)
	}
	var zh zhData
	if err := decodeStrict(zhJSON, &zh, "zh.json"); err != nil {
		return nil, err
	}
	rules, err := knowledge.LoadSet("rules", rulesJSON, "rules.json", nil)
	if err != nil {
		return nil, err
	}
	powersOf := map[string][]string{}
	for _, p := range data.SpecialPowers {
		for _, a := range p.UsedBy {
			powersOf[a] = append(powersOf[a], p.Name)
		}
	}
	out := map[string][]byte{}
	for _, set := range setNames {
		f := knowledge.SetFile{Global: rules.Global()}
		factions := knowledge.DimensionFile{Name: "factions"}
		for _, key := range setFactions[set] {
			fac, ok := data.Factions[key]
			if !ok {
				return nil, fmt.Errorf("assets.json has no faction %q", key)
			}
			if fac.Zh != factionNames[key] {
				return nil, fmt.Errorf("assets.json names faction %s %q, the sets use %q", key, fac.Zh, factionNames[key])
			}
			sc := knowledge.ScopeFile{Value: factionNames[key]}
			for _, o := range fac.Objects {
				e, err := assetEntry(o, powersOf[o.Asset], &zh)
				if err != nil {
					return nil, err
				}
				sc.Entries = append(sc.Entries, e)
			}
			factions.Scopes = append(factions.Scopes, sc)
		}
		maps := knowledge.DimensionFile{Name: "maps"}
		for _, m := range data.Maps {
			note, ok := zh.Maps[m.ID]
			if !ok || note == "" {
				return nil, fmt.Errorf("zh.json: no Chinese note for map %s", m.ID)
			}
			maps.Scopes = append(maps.Scopes, knowledge.ScopeFile{Value: m.ID, Entries: []knowledge.Entry{{
				ID: "map-overview", Tags: []string{}, Text: "### 地图概况\n- " + note + "\n",
			}}})
		}
		f.Dimensions = []knowledge.DimensionFile{factions, maps}
		b := f.JSON()
		// Prove the output loads before anyone commits it.
		if _, err := knowledge.LoadSet(set, b, set+".json", []string{"factions", "maps"}); err != nil {
			return nil, fmt.Errorf("generated %s does not load: %w", set, err)
		}
		out[set] = b
	}
	return out, nil
}

var (
	kindZh = map[string]string{
		"infantry": "步兵", "vehicle": "载具", "aircraft": "飞行器", "naval": "舰船", "structure": "建筑",
		"hero": "英雄单位", "production": "生产建筑", "defense": "防御设施", "superweapon": "超级武器",
	}
	capabilityZh = map[string]string{
		"builder":          "建造者（可作为建造者建造建筑）",
		"pack":             "可打包（pack）为移动形态",
		"unpack":           "可展开（unpack）",
		"amphibious":       "两栖（可在陆地和水面移动）",
		"transport":        "可搭载步兵",
		"returnToProducer": "可返回生产建筑（如返回机场）",
		"cloak":            "隐形/伪装",
		"toggleWeapon":     "可切换武器或模式",
	}
	roleZh = map[string]string{
		"antiInfantry": "对步兵", "antiVehicle": "对载具", "antiStructure": "对建筑", "antiAir": "对空", "antiNaval": "对舰船",
	}
)

// assetEntry renders one asset: id = asset name; tags = the sourced tags plus one
// specialPower tag per power the asset uses; text = names, kind, capabilities,
// roles, powers, cost and the Chinese note.
func assetEntry(o object, powers []string, zh *zhData) (knowledge.Entry, error) {
	note, ok := zh.Assets[o.Asset]
	if !ok {
		return knowledge.Entry{}, fmt.Errorf("zh.json: no Chinese note for asset %s (use \"\" for none)", o.Asset)
	}
	if _, ok := kindZh[o.Kind]; !ok {
		return knowledge.Entry{}, fmt.Errorf("asset %s: unknown kind %q", o.Asset, o.Kind)
	}
	tags := slices.Clone(o.Tags)
	for _, t := range tags {
		if !knowledge.IsBuiltinTag(t) {
			return knowledge.Entry{}, fmt.Errorf("asset %s: tag %q is not in the taxonomy", o.Asset, t)
		}
	}
	for _, p := range powers {
		tags = append(tags, knowledge.SpecialPowerTag(p))
	}

	var b strings.Builder
	b.WriteString("### " + o.Asset + title(o, zh) + "\n")

	types := []string{kindZh[o.Kind]}
	for _, t := range knowledge.TypeTags {
		if t != o.Kind && slices.Contains(o.Tags, t) {
			types = append(types, kindZh[t])
		}
	}
	b.WriteString("- 类别：" + strings.Join(types, "、") + "\n")
	var caps, roles []string
	for _, t := range knowledge.CapabilityTags {
		if slices.Contains(o.Tags, t) {
			caps = append(caps, capabilityZh[t])
		}
	}
	for _, t := range knowledge.CombatRoleTags {
		if slices.Contains(o.Tags, t) {
			roles = append(roles, roleZh[t])
		}
	}
	if len(caps) > 0 {
		b.WriteString("- 能力：" + strings.Join(caps, "；") + "\n")
	}
	if len(roles) > 0 {
		b.WriteString("- 作战定位：" + strings.Join(roles, "、") + "\n")
	}
	if len(powers) > 0 {
		parts := make([]string, len(powers))
		for i, p := range powers {
			pn, ok := zh.Powers[p+"@"+o.Asset]
			if !ok {
				pn, ok = zh.Powers[p]
			}
			if !ok {
				return knowledge.Entry{}, fmt.Errorf("zh.json: no Chinese note for special power %s", p)
			}
			parts[i] = "`" + p + "`（" + pn + "）"
		}
		b.WriteString("- 回放中可见的特殊能力：" + strings.Join(parts, "；") + "\n")
	}
	if o.Cost != nil {
		b.WriteString("- 造价：" + strconv.Itoa(*o.Cost) + "\n")
	}
	if note != "" {
		b.WriteString("- 说明：" + note + "\n")
	}
	return knowledge.Entry{ID: o.Asset, Tags: tags, Text: b.String()}, nil
}

// title renders "：中文名 / English name", or says that no source names the asset.
func title(o object, zh *zhData) string {
	var cn, en string
	if o.NameZh != nil {
		cn = *o.NameZh
	}
	if n, ok := zh.Names[o.Asset]; ok {
		cn = n
	}
	if o.NameEn != nil {
		en = *o.NameEn
	}
	switch {
	case cn == "" && en == "":
		return "（名称无可靠来源）"
	case cn == "" || cn == en:
		return "：" + en
	case en == "":
		return "：" + cn
	}
	return "：" + cn + " / " + en
}
