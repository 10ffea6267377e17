"""Short texts with their language (ISO 639-1), the kind modstream moderates: the demo's texts
(modstream/demo/demo_workload.py), the generated workload's (modstream/demo/workload.py),
transcripts as speech_text writes them (lower case, no punctuation), and posts of three to ten words
in thirteen other languages, benign and abusive alike. `UNDETERMINED_SAMPLES` name no language (a
word shared by many, an emoticon, a number): an identifier should not name one for them.

What modstream/bench/language.py measures the language identifiers on, and what
tests/udfs/test_language.py checks the chosen one against.
"""

from __future__ import annotations

from modstream.demo.demo_workload import SAMPLE_TEXTS

SAMPLES: dict[str, tuple[str, ...]] = {
    "en": (
        *SAMPLE_TEXTS,
        "generated text 17",
        "generated text 4242",
        "you are a stupid idiot",  # a transcript, as speech_text writes one
        "the meeting moved to thursday at ten",
        "meet me at the park at noon",
        "thanks!",
    ),
    "de": (
        "Das Wetter ist heute wirklich schön",
        "Wir treffen uns morgen um zehn Uhr",
        "Hat jemand ein gutes Rezept für Brot?",
        "Du bist so ein dummer Idiot",
        "Danke für deine Hilfe gestern",
        "Neue Fotos von der Reise sind online",
        "Halt die Klappe, du Versager",
        "Unser Team hat das Spiel gewonnen!",
        "danke schön",
    ),
    "fr": (
        "Il fait vraiment beau aujourd'hui",
        "La réunion est déplacée à jeudi",
        "Quelqu'un a une bonne recette de pain ?",
        "Tu es vraiment un idiot",
        "Merci pour ton aide hier",
        "Les nouvelles photos du voyage sont en ligne",
        "Tais-toi, espèce d'imbécile",
        "Notre équipe a gagné le match !",
        "merci beaucoup",
    ),
    "es": (
        "Hace un día precioso para pasear",
        "La reunión se cambió al jueves",
        "¿Alguien tiene una buena receta de pan?",
        "Eres un idiota y todos te odian",
        "Gracias por tu ayuda ayer",
        "Ya subí las fotos del viaje",
        "Cállate, no sirves para nada",
        "¡Nuestro equipo ganó el partido!",
        "muchas gracias",
    ),
    "it": (
        "Oggi è una bella giornata per una passeggiata",
        "La riunione è stata spostata a giovedì",
        "Qualcuno ha una buona ricetta per il pane?",
        "Sei proprio uno stupido",
        "Grazie per l'aiuto di ieri",
        "Le nuove foto del viaggio sono online",
        "Stai zitto, non vali niente",
        "La nostra squadra ha vinto la partita!",
        "grazie mille",
    ),
    "pt": (
        "Que dia lindo para passear no parque",
        "A reunião mudou para quinta-feira",
        "Alguém tem uma boa receita de pão?",
        "Você é um idiota e todo mundo te odeia",
        "Obrigado pela ajuda ontem",
        "As fotos novas da viagem já estão no ar",
        "Cala a boca, seu inútil",
        "Nosso time ganhou o jogo!",
    ),
    "nl": (
        "Het is heerlijk weer om te wandelen",
        "De vergadering is verplaatst naar donderdag",
        "Heeft iemand een goed recept voor brood?",
        "Je bent echt een sukkel",
        "Bedankt voor je hulp gisteren",
        "Nieuwe foto's van de reis staan online",
        "Hou je mond, waardeloze idioot",
        "Ons team heeft de wedstrijd gewonnen!",
    ),
    "pl": (
        "Dzisiaj jest piękna pogoda na spacer",
        "Spotkanie przeniesiono na czwartek",
        "Czy ktoś ma dobry przepis na chleb?",
        "Jesteś głupim idiotą",
        "Dzięki za wczorajszą pomoc",
        "Nowe zdjęcia z wycieczki są już w sieci",
        "Zamknij się, nic nie jesteś wart",
        "Nasza drużyna wygrała mecz!",
    ),
    "tr": (
        "Bugün yürüyüş için hava çok güzel",
        "Toplantı perşembeye ertelendi",
        "İyi bir ekmek tarifi olan var mı?",
        "Sen tam bir aptalsın",
        "Dünkü yardımın için teşekkürler",
        "Geziden yeni fotoğraflar yüklendi",
        "Kes sesini, işe yaramazın teki",
        "Takımımız maçı kazandı!",
    ),
    "ru": (
        "Сегодня отличная погода для прогулки",
        "Встречу перенесли на четверг",
        "У кого-нибудь есть хороший рецепт хлеба?",
        "Ты просто тупой идиот",
        "Спасибо за помощь вчера",
        "Новые фотографии из поездки уже выложены",
        "Заткнись, ты ничтожество",
        "Наша команда выиграла матч!",
    ),
    "uk": (
        "Сьогодні чудова погода для прогулянки",
        "Зустріч перенесли на четвер",
        "Дякую за допомогу вчора",
        "Наша команда виграла матч!",
    ),
    "ar": (
        "الطقس جميل اليوم للتنزه",
        "تم تأجيل الاجتماع إلى يوم الخميس",
        "هل لدى أحد وصفة جيدة للخبز؟",
        "أنت غبي والجميع يكرهك",
        "شكرا على مساعدتك أمس",
        "صور جديدة من الرحلة",
        "اسكت يا عديم الفائدة",
        "فريقنا فاز بالمباراة!",
    ),
    "zh": (
        "今天天气很好，适合散步",
        "会议改到星期四了",
        "有人有好的面包食谱吗？",
        "你是个笨蛋，大家都讨厌你",
        "谢谢你昨天的帮助",
        "旅行的新照片已经上传了",
        "闭嘴，你这个废物",
        "我们队赢了比赛！",
    ),
    "ja": (
        "今日は散歩にぴったりの天気です",
        "会議は木曜日に変更になりました",
        "美味しいパンのレシピを知っている人はいますか？",
        "お前は本当にバカだ",
        "昨日は手伝ってくれてありがとう",
        "旅行の新しい写真をアップしました",
        "黙れ、役立たず",
        "私たちのチームが試合に勝った！",
    ),
}
UNDETERMINED_SAMPLES: tuple[str, ...] = ("ok", "lol", ":-)", "12345", ".", "!!!", "👍")


def labelled() -> list[tuple[str, str]]:
    """(text, language) of every sample, in a fixed order."""
    return [(text, language) for language, texts in SAMPLES.items() for text in texts]
