"""Skills: the skill packs of clawsdk_skills and folder skills (~/.clawsdk/skills)."""
