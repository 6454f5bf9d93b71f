package main

import (
	"strings"
	"testing"
)

func TestDemoShowsTheInjectedPrompt(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCmd(t, runDemo)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"resolved from the log's header lines: knowledge set ra3, factions 盟军, 苏联 (player order), map map_mp_2_rao1",
		"the first is the injected system prompt",
		"| # 红色警戒 3 游戏知识",
		"its sections: 通用规则 · 阵营：盟军 · 阵营：苏联 · 地图：map_mp_2_rao1 · 应用的补充要求",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, stdout)
		}
	}
}
